"""Benchmark: the query service (``neo-assets serve``) and hybrid ranking.

Run from the repo root: ``python -m bench.query`` (``--rows N``, ``--requests N``,
``--repos NAME=DIR ...``; defaults: 30,000 rows, 400 timed requests per case, and the
retrieval set's checkouts under /tmp/bench-repos when present). It never downloads.

1. **Latency** of ``POST /v1/search`` through a real server in a subprocess on loopback,
   4 clients at once (httpx), over a knowledge base of ``--rows`` rows of one tenant
   (plus a tenth as many of a second tenant, which must never be returned), with:
   - the hashing embedder (rows embedded by it, as a sweep would);
   - the bundled model (all-MiniLM-L6-v2) answering the query; the rows carry random
     unit vectors stamped with its generation (a search's cost does not depend on what
     the vectors say, and embedding 30,000 chunks would take this machine ~10 minutes).
   Figures: p50 / p95 / max in ms, answered / refused counts, and the first request's
   time (it computes the read-side truth for the tenant: reading its rows' stamps once;
   every later query costs a set lookup per hit until a sweep writes).
2. **Recall@5, hybrid vs vector-only**, through the same query library in-process
   (``QueryService.search``, ``hybrid=True/False``) over the public repositories of
   ``bench/retrieval_questions.json`` (48 hand-written questions, how they were written
   is in that file), chunked by neo-code 2.0.0 and embedded with the bundled model. Two
   phrasings per question: as written (natural language), and the identifier variant
   ("What does <name> do?", the name taken mechanically from the answer's definition
   line), since agents that read code ask by symbol.

The rows are written with the project's own stamps and recorded in the ledger as the
repo's declared generation (envelope + chunks), as a complete sweep leaves them.
The last stdout line is one JSON object with every figure.
"""

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: the repo root, not bench/, on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent
BENCH_REPOS = Path("/tmp/bench-repos")
CONCURRENCY = 4
K = 5
PARSER_VERSION = "2.0.0"
WORDS = (
    "request response handler router widget render cache token session user account "
    "config parser stream buffer retry timeout client server queue worker schedule "
    "index search vector chunk repo commit branch merge diff patch file path glob"
).split()


# ---------------------------------------------------------------------------- seeding
def write_tenants(root: Path, tenants: dict[str, list[str]]) -> Path:
    import yaml

    doc = {"tenants": []}
    for tenant, slugs in tenants.items():
        repos = []
        for slug in slugs:
            path = root / "repos" / tenant / slug
            path.mkdir(parents=True, exist_ok=True)
            repos.append(
                {
                    "slug": slug,
                    "path": str(path),
                    "parser": {"id": "neo-code", "version": PARSER_VERSION},
                }
            )
        doc["tenants"].append({"id": tenant, "repos": repos})
    path = root / "tenants.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def seed(
    settings: Any, store: Any, ledger: Any, tenant: str, slug: str, chunks: list[Any], vectors: Any
) -> None:
    """Write ``chunks`` as rows and record them as the repo's complete declared generation."""
    import numpy as np

    from neo_assets.core.ids.stamps import chunk_metadata, row_stamps
    from neo_assets.generations.serving import configured_generation
    from neo_assets.sources.rules.chunks import DeclaredChunk
    from neo_assets.tenants.validation import load_tenants

    tenants = load_tenants(settings.store.resolved_tenants_file)
    repo = next(r for r in tenants.tenant(tenant).repos if r.slug == slug)
    now = time.time()
    revision = f"bench-{slug}"
    paths = sorted({c.source_path for c in chunks})
    ledger.record_envelope(
        tenant,
        slug,
        revision=revision,
        kind="dir",
        entries=[{"path": p, "yielded": True} for p in paths],
        now=now,
    )
    ledger.record_generation(
        tenant,
        slug,
        revision=revision,
        parser_id="neo-code",
        parser_version=PARSER_VERSION,
        declaration_digest=repo.declaration_digest(),
        chunks=[DeclaredChunk(c.chunk_id, c.source_path, c.kind, c.name, None) for c in chunks],
        now=now,
    )
    version = ledger.config_version(tenant, tenants.tenant(tenant).declaration_digest(), now)
    generation = configured_generation(settings)
    metas = [
        chunk_metadata(
            language=c.language,
            start_line=c.start_line,
            end_line=c.end_line,
            qualified_name=c.qualified_name,
            parent=c.parent,
        )
        | row_stamps(
            tenant_id=tenant,
            repo_slug=slug,
            source_path=c.source_path,
            kind=c.kind,
            name=c.name,
            parser_id="neo-code",
            parser_version=PARSER_VERSION,
            tenant_config_version=version,
            ingested_at=now + 1,
            revision=revision,
            embedding_generation=generation,
        )
        for c in chunks
    ]
    store.add(
        [c.chunk_id for c in chunks],
        np.asarray(vectors, dtype=np.float32),
        [c.content for c in chunks],
        metas,
    )


def synthetic_chunks(tenant: str, slug: str, n: int, rng: random.Random) -> list[Any]:
    """``n`` function-sized chunks, ten per file, with code-like names and text."""
    from neo_assets.sources.rules.chunks import Chunk

    out = []
    for i in range(n):
        a, b, c = rng.sample(WORDS, 3)
        name = f"{a}_{b}_{i}"
        body = " ".join(rng.choice(WORDS) for _ in range(30))
        content = (
            f'def {name}({c}):\n    """{a} the {b} of a {c}."""\n    # {body}\n    return {c}\n'
        )
        out.append(
            Chunk(
                tenant_id=tenant,
                repo_slug=slug,
                source_path=f"pkg{i // 1000}/mod{i // 10}.py",
                parser_id="neo-code",
                parser_version=PARSER_VERSION,
                kind="function",
                name=name,
                content=content,
                start_line=1 + (i % 10) * 5,
                end_line=5 + (i % 10) * 5,
                language="python",
                qualified_name=f"pkg{i // 1000}.mod{i // 10}.{name}",
            )
        )
    return out


def embedding_inputs(chunks: list[Any]) -> list[str]:
    from neo_assets.embedding.rules.input import embedding_input

    return [
        embedding_input(
            c.content,
            kind=c.kind,
            name=c.name,
            qualified_name=c.qualified_name,
            source_path=c.source_path,
            parser_version=c.parser_version,
        )
        for c in chunks
    ]


def unit_vectors(n: int, dims: int, rng: random.Random) -> Any:
    import numpy as np

    v = np.random.default_rng(rng.randrange(1 << 30)).standard_normal((n, dims)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


# ---------------------------------------------------------------------------- latency
def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    import httpx

    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "neo_assets.cli",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"serve exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"serve did not start: {log.read_text()[-2000:]}")


async def load(url: str, token: str, queries: list[str], requests: int) -> dict[str, Any]:
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    foreign = 0
    async with httpx.AsyncClient(headers=headers, timeout=60) as client:
        started = time.perf_counter()
        first = await client.post(f"{url}/v1/search", json={"query": queries[0], "k": 10})
        first_ms = (time.perf_counter() - started) * 1000
        assert first.status_code == 200, first.text
        for q in queries[:20]:  # warm-up, not timed
            await client.post(f"{url}/v1/search", json={"query": q, "k": 10})
        todo = list(range(requests))

        async def worker() -> None:
            nonlocal foreign
            while todo:
                i = todo.pop()
                body = {"query": queries[i % len(queries)], "k": 10}
                t0 = time.perf_counter()
                r = await client.post(f"{url}/v1/search", json=body)
                latencies.append((time.perf_counter() - t0) * 1000)
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                if r.status_code == 200:
                    foreign += sum(
                        h["metadata"]["tenantId"] != "bench" for h in r.json()["results"]
                    )

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    latencies.sort()
    return {
        "requests": len(latencies),
        "concurrency": CONCURRENCY,
        "p50_ms": round(statistics.median(latencies), 2),
        "p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
        "max_ms": round(latencies[-1], 2),
        "first_request_ms": round(first_ms, 1),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "foreign_rows_returned": foreign,
    }


def latency_case(
    provider: str, rows: int, requests: int, extra_env: dict[str, str]
) -> dict[str, Any]:
    from neo_assets.config.settings import load_settings
    from neo_assets.serve.tokens import issue_token
    from neo_assets.services.handles import open_ledger, open_store

    rng = random.Random(25)
    with tempfile.TemporaryDirectory(prefix="bench-query-") as tmp:
        root = Path(tmp)
        tenants_path = write_tenants(root, {"bench": ["big"], "other": ["theirs"]})
        env = {k: v for k, v in os.environ.items() if not k.startswith("NEO_")}
        env |= {
            "NEO_HOME": str(root / "home"),
            "NEO_TENANTS_FILE": str(tenants_path),
            "NEO_EMBEDDING_PROVIDER": provider,
            "HF_HUB_OFFLINE": "1",
            **extra_env,
        }
        saved = dict(os.environ)
        os.environ.update(env)
        try:
            settings = load_settings()
            started = time.perf_counter()
            with open_ledger(settings) as ledger, open_store(settings) as store:
                for tenant, slug, n in (("bench", "big", rows), ("other", "theirs", rows // 10)):
                    chunks = synthetic_chunks(tenant, slug, n, rng)
                    if provider == "hashing":
                        from neo_assets.embedding.providers.hash_features import embed_texts

                        vectors = embed_texts(embedding_inputs(chunks), 384)
                    else:
                        vectors = unit_vectors(n, 384, rng)
                    seed(settings, store, ledger, tenant, slug, chunks, vectors)
                _record, token = issue_token(ledger, "bench", [], "bench", time.time())
            seed_s = time.perf_counter() - started
        finally:
            os.environ.clear()
            os.environ.update(saved)
        port = free_port()
        proc = start_server(env, port, root / "serve.log")
        try:
            queries = [
                f"{a}_{b}_{rng.randrange(rows)}" if i % 2 else f"how does the {a} {b} a {c}"
                for i, (a, b, c) in enumerate(rng.sample(WORDS, 3) for _ in range(60))
            ]
            figures = asyncio.run(load(f"http://127.0.0.1:{port}", token, queries, requests))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return {
        "provider": provider,
        "rows": rows,
        "foreign_tenant_rows": rows // 10,
        "seed_s": round(seed_s, 1),
        **figures,
    }


def model_embed_ms(tries: int = 30) -> dict[str, float]:
    """One short query embedded by the bundled model's provider, in this process, one at a
    time: the floor under the served latency with that model."""
    from neo_assets.config.settings import load_settings
    from neo_assets.embedding.cancel import CancelScope
    from neo_assets.services.handles import build_provider

    saved = dict(os.environ)
    os.environ.update({"NEO_EMBEDDING_PROVIDER": "sentence_transformers", "HF_HUB_OFFLINE": "1"})
    try:
        provider = build_provider(load_settings())
    finally:
        os.environ.clear()
        os.environ.update(saved)

    async def go() -> list[float]:
        out = []
        try:
            await provider.embed(["warm up"], CancelScope(label="bench"), "bench")
            for i in range(tries):
                t0 = time.perf_counter()
                await provider.embed([f"how is request {i} routed"], CancelScope(label="b"), "b")
                out.append((time.perf_counter() - t0) * 1000)
        finally:
            await provider.aclose()
        return sorted(out)

    times = asyncio.run(go())
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
    }


# ---------------------------------------------------------------------------- recall
_DEF_NAME = re.compile(r"([A-Za-z_$][A-Za-z0-9_$]*)\s*(?:<[^>]*>)?\s*\(")
_ASSIGNED = re.compile(r"(?:const|let|var)\s+([A-Za-z_$][A-Za-z0-9_$]*)\s*=")
_KEYWORDS = {"func", "function", "fn", "def", "async", "if", "for", "while", "return"}
# `res.cookie = function (...)`, `exports.compileTrust = function(...)`: the member.
_MEMBER = re.compile(r"([A-Za-z_$][A-Za-z0-9_$]*)\s*=\s*(?:async\s+)?function\b")
# `fn check_loop<P: AsRef<Path>>(`, `func (c *Command) Name(`, `export function isHTTPError`.
_AFTER_KEYWORD = re.compile(
    r"\b(?:def|fn|func|function|class)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][A-Za-z0-9_$]*)"
)


def definition_name(definition: str) -> str | None:
    """The defined name in a definition line: an assigned member's, else the name after a
    definition keyword, else the last call-like name that is no keyword, else an assigned
    name."""
    for rule in (_MEMBER, _AFTER_KEYWORD):
        found = rule.search(definition)
        if found:
            return found.group(1)
    names = [n for n in _DEF_NAME.findall(definition) if n not in _KEYWORDS]
    if names:
        return names[-1]
    assigned = _ASSIGNED.search(definition)
    return assigned.group(1) if assigned else None


def recall_case(repos: dict[str, Path]) -> dict[str, Any]:
    from bench.retrieval import QUESTIONS, corpus, load_model
    from neo_assets.config.settings import load_settings
    from neo_assets.generations.serving import configured_generation
    from neo_assets.query.rules.ranking import DEFAULT_RANKING, LEGACY
    from neo_assets.query.rules.request import SearchRequest
    from neo_assets.query.search import QueryService
    from neo_assets.query.serving import Resident
    from neo_assets.services.handles import build_provider, open_ledger, open_store
    from neo_assets.sources.parsers.neo_code import PARSER_ID, chunk_file

    sets = json.loads(QUESTIONS.read_text(encoding="utf-8"))["repos"]
    out: dict[str, Any] = {"k": K, "repos": {}}
    # "hybrid_legacy": the ranking before issue 38 (names only, parts apart, no source
    # prior), measured on the same rows in the same run.
    modes = ("hybrid", "hybrid_legacy", "vector")
    totals = {p: dict.fromkeys(modes, 0) for p in ("natural", "identifier")}
    asked = 0
    with tempfile.TemporaryDirectory(prefix="bench-recall-") as tmp:
        root = Path(tmp)
        tenants_path = write_tenants(root, {"bench": list(repos)})
        saved = dict(os.environ)
        os.environ.update(
            {
                "NEO_HOME": str(root / "home"),
                "NEO_TENANTS_FILE": str(tenants_path),
                "NEO_EMBEDDING_PROVIDER": "sentence_transformers",
                "HF_HUB_OFFLINE": "1",
                "NEO_SERVE_TRUTH_RECHECK_S": "60",
            }
        )
        try:
            settings = load_settings()
            with open_ledger(settings) as ledger, open_store(settings) as store:
                model = load_model()

                async def run() -> None:
                    nonlocal asked
                    provider = build_provider(settings)
                    try:
                        for name, path in repos.items():
                            spec = sets[name]
                            chunks = [
                                ch
                                for rel, text in corpus(path, spec)
                                for ch in chunk_file(
                                    "bench", name, rel, text, PARSER_ID, PARSER_VERSION
                                ).chunks
                            ]
                            started = time.perf_counter()
                            # Rows embedded as bench/retrieval.py does: an input over the
                            # model's window is truncated by the model (a sweep would split
                            # it into parts; the query side is the service's own provider).
                            vectors = model.encode(
                                embedding_inputs(chunks),
                                batch_size=32,
                                normalize_embeddings=True,
                                show_progress_bar=False,
                            )
                            embed_s = time.perf_counter() - started
                            seed(settings, store, ledger, "bench", name, chunks, vectors)
                            svc = QueryService(Resident(settings, store, ledger))
                            # The provider that embedded the rows answers the questions.
                            svc.resident._providers[configured_generation(settings)] = provider  # noqa: SLF001
                            figures: dict[str, Any] = {
                                "chunks": len(chunks),
                                "embed_s": round(embed_s, 1),
                            }
                            for phrasing in ("natural", "identifier"):
                                for mode in modes:
                                    svc.ranking = (
                                        LEGACY if mode == "hybrid_legacy" else DEFAULT_RANKING
                                    )
                                    hits = 0
                                    missed = []
                                    for q in spec["questions"]:
                                        ident = definition_name(q["definition"])
                                        text = (
                                            q["q"]
                                            if phrasing == "natural"
                                            else f"What does {ident} do?"
                                        )
                                        got = await svc.search(
                                            "bench",
                                            SearchRequest(query=text, k=K, repo=name),
                                            hybrid=mode != "vector",
                                        )
                                        hit = any(
                                            r["path"] == q["path"]
                                            and q["definition"] in (r["document"] or "")
                                            for r in got["results"]
                                        )
                                        hits += hit
                                        if not hit:
                                            missed.append(text)
                                    figures[f"{phrasing}_{mode}_recall_at_5"] = round(
                                        hits / len(spec["questions"]), 4
                                    )
                                    figures[f"{phrasing}_{mode}_missed"] = missed
                                    totals[phrasing][mode] += hits
                            asked += len(spec["questions"])
                            out["repos"][name] = {
                                "source": spec["source"],
                                "commit": spec.get("commit"),
                                **figures,
                            }
                            print(f"{name}: {figures}", file=sys.stderr)
                    finally:
                        await provider.aclose()

                asyncio.run(run())
        finally:
            os.environ.clear()
            os.environ.update(saved)
    out["questions"] = asked
    for phrasing, modes in totals.items():
        for mode, hits in modes.items():
            out[f"{phrasing}_{mode}_recall_at_5"] = round(hits / asked, 4) if asked else None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument(
        "--repos", nargs="*", default=None, help="NAME=DIR (default: /tmp/bench-repos/*)"
    )
    parser.add_argument("--skip-model", action="store_true", help="hashing latency only")
    parser.add_argument("--skip-latency", action="store_true", help="recall only")
    args = parser.parse_args(argv)
    summary: dict[str, Any] = {"bench": "query", "target_p95_ms": 50}
    summary["load_average_at_start"] = os.getloadavg()[0]
    if not args.skip_latency:
        summary["hashing"] = latency_case("hashing", args.rows, args.requests, {})
        summary["hashing_vector_only"] = latency_case(
            "hashing", args.rows, args.requests, {"NEO_SERVE_HYBRID": "false"}
        )
        print(f"hashing: {summary['hashing']}", file=sys.stderr)
        summary["hashing_p95_within_target"] = summary["hashing"]["p95_ms"] <= 50
    if not args.skip_model and not args.skip_latency:
        summary["bundled_model_embed_one_query_ms"] = model_embed_ms()
        summary["bundled_model"] = latency_case(
            "sentence_transformers", args.rows, args.requests, {}
        )
        print(f"bundled model: {summary['bundled_model']}", file=sys.stderr)
    if not args.skip_model:
        if args.repos is None:
            repos = (
                {p.name: p for p in sorted(BENCH_REPOS.glob("*")) if p.is_dir()}
                if BENCH_REPOS.is_dir()
                else {}
            )
        else:
            repos = {item.partition("=")[0]: Path(item.partition("=")[2]) for item in args.repos}
        sets = json.loads((ROOT / "bench" / "retrieval_questions.json").read_text())["repos"]
        repos = {n: p for n, p in repos.items() if n in sets}
        summary["recall"] = recall_case(repos) if repos else {"skipped": "no checkouts"}
    summary["load_average_at_end"] = os.getloadavg()[0]
    print(json.dumps(summary, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
