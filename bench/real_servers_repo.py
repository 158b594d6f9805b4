"""A real repository swept against both real llama.cpp servers, three fresh times each.

    python -m bench.real_servers_repo [--repo PATH] [--sweeps 3] [--servers a,b] [--only src]
    python -m bench.real_servers_repo --restart [--repo PATH] [--only src]

Needs ``.ci/build-llama``'s artifacts (``llama-server``, the llama-cpp-python wheel
installed, ``minilm-f16.gguf``). Each server serves the bundled model converted to GGUF
with 512 tokens per input (llama-server: ``-c 1024 --parallel 2``; llama-cpp-python:
``--n_ctx 512``, one request at a time, silent truncation). Each sweep starts from an
empty ``NEO_HOME`` through ``run_sweep`` with the OpenAI-compatible provider and only its
URL, model and dimensions set (``--tokenizer auto``, the default: the limit and the
tokenizer are what the server's first contact says; ``server``/``estimate`` set
``NEO_EMBEDDING_CONTEXT_TOKENS=512``, batches of 32 and that tokenizer), and is judged by
counts, not times:

- the outcome and the counts (offered, embedded, requests, fenced) of every sweep of one
  server must be equal (``deterministic``);
- no stored row's embedding input is over the server's limit, counted by the server's
  own tokenizer (``over_limit``: an input the server would have cut);
- no chunk fenced ``proven-content-poison``;
- ``requests`` against ``ceil(embedded / batch)`` (``requests_over_ideal``: the share of
  requests beyond one per full batch).

``--restart``: llama-server started with ``-c 512`` (256 tokens a slot), one sweep, then
restarted on the same address with ``-c 2048`` and the repo swept again in the same
``NEO_HOME``: the second must be complete at a new generation (the limit discovered anew)
with nothing left undeliverable.

Human lines go to stderr; the last stdout line is one JSON object.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):  # run as a file: the repo root, not bench/, first on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.real_model import _write_tenants, stored_input, sweep_declared  # noqa: E402

DEFAULT_REPO = Path("/tmp/bench-repos/flask")
LIMIT = 512


def _token_count(client: httpx.Client, server: str, text: str) -> int:
    """The server's own count of ``text``'s tokens."""
    if server == "llama-server":
        got = client.post("/tokenize", json={"content": text, "add_special": True})
        return len(got.json()["tokens"])
    got = client.post("/extras/tokenize/count", json={"input": text})
    return int(got.json()["count"])


def one_sweep(
    repo: Path,
    base_url: str,
    server: str,
    tokenizer: str = "auto",
    ceiling_ms: int | None = None,
    only: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A fresh sweep of ``repo`` (its top-level ``only`` entries, when given) against the
    server at ``base_url``: its counts."""
    home = Path(tempfile.mkdtemp(prefix="neo-bench-real-servers-"))
    _write_tenants(home / "tenants.yaml", repo, "2.0.0", only)
    return sweep_in(home, repo, base_url, server, tokenizer=tokenizer, ceiling_ms=ceiling_ms)


def sweep_in(
    home: Path,
    repo: Path,
    base_url: str,
    server: str,
    *,
    progress: Callable[[int, int, int], None] | None = None,
    watch_provider: Callable[[Any], None] | None = None,
    tokenizer: str = "auto",
    ceiling_ms: int | None = None,
    limit: int = LIMIT,
) -> dict[str, Any]:
    """A sweep of ``repo`` in ``home`` (fresh when empty, incremental after an earlier one):
    its counts, and the ledger's strikes and fences at the sweep's generation.
    ``progress`` hears the lane's (batches done, batches, embedded); ``watch_provider`` is
    handed the sweep's provider before it runs (to wrap its calls); ``tokenizer`` is how
    the split counts (NEO_EMBEDDING_TOKENIZER; ``auto``: nothing but the URL, model and
    dimensions set, as a new user would)."""
    tenants = home / "tenants.yaml"
    if not tenants.exists():
        _write_tenants(tenants, repo, "2.0.0")
    os.environ.update(
        {
            "NEO_HOME": str(home),
            "NEO_TENANTS_FILE": str(tenants),
            "NEO_EMBEDDING_PROVIDER": "openai_compatible",
            "NEO_EMBEDDING_BASE_URL": base_url,
            "NEO_EMBEDDING_MODEL": "minilm-f16",
            "NEO_EMBEDDING_DIMENSIONS": "384",
            "NEO_PROVIDER_SLOTS_DIR": str(home / "slots"),
        }
    )
    band = {
        "NEO_EMBEDDING_CONTEXT_TOKENS": str(LIMIT),
        "NEO_EMBEDDING_TOKENIZER": tokenizer,
        "NEO_EMBEDDING_BATCH_SIZE": "32",
    }
    if ceiling_ms:  # a loaded machine embeds slower than the default ceilings assume
        band["NEO_EMBEDDING_CALL_CEILING_MS"] = str(ceiling_ms)
        os.environ["NEO_EMBEDDING_CALL_CEILING_MS"] = str(ceiling_ms)
        os.environ["NEO_EMBEDDING_REQUEST_TIMEOUT_MS"] = str(ceiling_ms)
    for name, value in band.items():
        if name == "NEO_EMBEDDING_CALL_CEILING_MS":
            continue
        if tokenizer == "auto":
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    from neo_assets.core.ids.stamps import tenant_filter  # noqa: PLC0415
    from neo_assets.generations.serving import (  # noqa: PLC0415
        configured_generation,
        generation_store,
    )

    result, settings, ctx, ledger, store, seconds = sweep_declared(
        tenants, progress=progress, watch_provider=watch_provider
    )
    target = generation_store(settings, ledger, store, configured_generation(settings))
    rows = target.collection.get(
        where=tenant_filter("bench", "repo"), include=["documents", "metadatas"]
    )
    over = 0
    with httpx.Client(base_url=base_url, timeout=30.0) as client:
        for doc, meta in zip(rows["documents"], rows["metadatas"], strict=True):
            if _token_count(client, server, stored_input(doc, meta)) > limit:
                over += 1
    counts = result.counts.to_doc()
    batch = settings.embedding.resolved_batch_size
    ideal = math.ceil(int(counts.get("embedded") or 0) / batch)
    generation = result.report.embedding_generation or configured_generation(settings)
    strikes = ledger.strikes(ctx.tenant_id, ctx.repo_slug, generation)
    state = ledger.repo_state(ctx.tenant_id, ctx.repo_slug) or {}
    summary = json.loads(state.get("last_summary") or "{}")
    events: dict[str, int] = {}
    for row in summary.get("events", []):
        what = f"{row.get('code')}: {str(row.get('message', ''))[:60]}"
        events[what] = events.get(what, 0) + 1
    fences = ledger.fences(ctx.tenant_id, ctx.repo_slug, generation)
    store.close()
    ledger.dispose()
    by_class: dict[str, int] = {}
    for fence in fences:
        by_class[fence["disposition"]] = by_class.get(fence["disposition"], 0) + 1
    return {
        "outcome": result.outcome,
        "generation": generation,
        "rows": len(rows["ids"]),
        "offered": counts.get("offered"),
        "embedded": counts.get("embedded"),
        "requests": counts.get("requests"),
        "requests_ideal": ideal,
        "requests_over_ideal": round((int(counts.get("requests") or 0) - ideal) / max(ideal, 1), 3),
        "poison": int(counts.get("fencedPoison", 0)),
        "undeliverable": int(counts.get("fencedUndeliverable", 0)),
        "deferred": int(counts.get("deferred", 0)),
        "over_limit": over,
        "deferred_cause": result.report.deferred_cause_code,
        "strikes": len(strikes),
        "struck": [
            {"chunkId": s["chunk_id"], "kind": s["kind"], "count": s["count"], **s["receipt"]}
            for s in strikes
        ],
        "fences": dict(sorted(by_class.items())),
        "events": dict(sorted(events.items())),
        "seconds": round(seconds, 1),
    }


def restart_case(repo: Path, only: tuple[str, ...]) -> dict[str, Any]:
    """llama-server started with ``-c 512`` (256 tokens a slot), the repo swept; the server
    restarted on the same address with ``-c 2048`` (512 a slot: the model's own window),
    the repo swept again in the same ``NEO_HOME``. Judged: both complete, the second a new
    generation (its limit discovered anew), what the first fenced delivered."""
    from neo_assets_tests.real_servers import LlamaServer, running  # noqa: PLC0415
    from neo_assets_tests.servers import free_port  # noqa: PLC0415

    home = Path(tempfile.mkdtemp(prefix="neo-bench-restart-"))
    _write_tenants(home / "tenants.yaml", repo, "2.0.0", only)
    logs = Path(tempfile.mkdtemp(prefix="neo-bench-restart-logs-"))
    port = free_port()
    out: dict[str, Any] = {}
    for label, ctx in (("c512", 512), ("c2048", 2048)):
        with running(LlamaServer(logs, slots=2, ctx=ctx, port=port)) as up:
            out[label] = sweep_in(
                home, repo, up.base_url, "llama-server", limit=min(ctx // 2, LIMIT)
            )
        print(f"restart {label}: {out[label]}", file=sys.stderr, flush=True)
    out["new_generation"] = out["c512"]["generation"] != out["c2048"]["generation"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", type=Path, default=DEFAULT_REPO)
    parser.add_argument("--sweeps", type=int, default=3)
    parser.add_argument("--servers", default="llama-server,llama_cpp.server")
    # How the split counts: ``auto`` (nothing set: what the server says), or the band set
    # by hand with the server's tokenizer or the estimate.
    parser.add_argument("--tokenizer", choices=["auto", "server", "estimate"], default="auto")
    # NEO_EMBEDDING_CALL_CEILING_MS and _REQUEST_TIMEOUT_MS for a machine loaded by other
    # work (unset: 60 s each).
    parser.add_argument("--ceiling-ms", type=int, default=None)
    # Top-level entries to sweep alone, comma-separated (e.g. ``src`` for neomjs/neo).
    parser.add_argument("--only", default="")
    # Instead of fresh sweeps: llama-server restarted from -c 512 to -c 2048 between two.
    parser.add_argument("--restart", action="store_true")
    args = parser.parse_args()
    only = tuple(filter(None, args.only.split(",")))
    repo = args.repo.resolve()
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if args.restart:
        print(
            json.dumps(
                {
                    "bench": "real_servers_repo",
                    "repo": str(repo),
                    "commit": commit,
                    "only": list(only),
                    "restart": restart_case(repo, only),
                }
            )
        )
        return
    from neo_assets_tests.real_servers import (  # noqa: PLC0415
        LlamaCppPythonServer,
        LlamaServer,
        running,
    )

    logs = Path(tempfile.mkdtemp(prefix="neo-bench-real-servers-logs-"))
    figures: dict[str, Any] = {
        "bench": "real_servers_repo",
        "repo": str(repo),
        "commit": commit,
        "tokenizer": args.tokenizer,
        "ceiling_ms": args.ceiling_ms,
        "only": list(only),
    }
    for name in args.servers.split(","):
        server = (
            LlamaServer(logs, slots=2, ctx=2 * LIMIT)
            if name == "llama-server"
            else LlamaCppPythonServer(logs, n_ctx=LIMIT)
        )
        sweeps = []
        with running(server) as up:
            for i in range(args.sweeps):
                got = one_sweep(repo, up.base_url, name, args.tokenizer, args.ceiling_ms, only)
                print(f"{name} sweep {i + 1}: {got}", file=sys.stderr, flush=True)
                sweeps.append(got)
        judged = [
            {k: v for k, v in s.items() if k not in ("seconds", "struck", "events")} for s in sweeps
        ]
        figures[name] = {
            "sweeps": sweeps,
            "deterministic": all(j == judged[0] for j in judged),
            "over_limit": sum(s["over_limit"] for s in sweeps),
            "poison": sum(s["poison"] for s in sweeps),
        }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
