"""The chunk stage in waves against the serial one: a first sweep of the same generated
repository, measured in the same run, alternating which goes first.

Two set-ups:
- ``local``: the embedded default (persistent Chroma, the hashing embedder);
- ``remote``: the same Chroma, embeddings from an OpenAI-compatible server (the
  fault-injecting server, a real subprocess, answering after ``--latency-ms``).

Each round sweeps a fresh home (ledger and Chroma) through the sweep's steps, without
Dagster. Last stdout line: one JSON object with every round and, per set-up, the median
of serial / waves (above 1: waves faster).

    python -m bench.waves [--files 2000] [--rounds 2] [--latency-ms 40]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file (python bench/x.py): the repo root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.sweep import generate_repo  # noqa: E402

DIMS = 384


def first_sweep(work: Path, name: str, tenants_path: Path, waves: bool) -> dict[str, Any]:
    from neo_assets.concurrency.chunk_waves import ChunkWaves, many_to_parse, pipelined
    from neo_assets.config.settings import load_settings
    from neo_assets.config.tenants import load_tenants
    from neo_assets.embedding.lifecycle import prepare
    from neo_assets.services import handles
    from neo_assets.services.sweep.steps import (
        EmbedContext,
        RepoContext,
        census_step,
        chunk_step,
        embed_step,
        envelope_step,
        plan_chunks,
    )

    os.environ["NEO_HOME"] = str(work / name)
    os.environ["NEO_PARSE_WAVES"] = "true" if waves else "false"
    settings = load_settings()
    tenant = load_tenants(tenants_path).tenants[0]
    ctx = RepoContext(tenant=tenant, repo=tenant.repos[0])
    with handles.open_ledger(settings) as ledger, handles.open_store(settings) as store:
        run = EmbedContext(provider=handles.build_provider(settings))
        t0 = time.perf_counter()
        now = time.time()
        env = envelope_step(ctx, settings, ledger, now)
        plan = plan_chunks(ctx, settings, ledger, env)
        if many_to_parse(plan, settings):
            prepare(run.provider)  # as the sweep does: its helpers start while the files parse
        if waves:
            assert pipelined(plan, settings)
            with ChunkWaves(ctx, settings, ledger, env, plan, now) as chunk_waves:
                summary = embed_step(
                    ctx, settings, store, ledger, env, chunk_waves.kept_frame(), run, chunk_waves
                )
        else:
            chunks = chunk_step(ctx, settings, ledger, env, now, plan=plan)
            summary = embed_step(ctx, settings, store, ledger, env, chunks, run)
        result = census_step(ctx, settings, ledger, env, summary, now)
        seconds = time.perf_counter() - t0
    assert result["outcome"] == "complete", result
    return {
        "waves": waves,
        "seconds": round(seconds, 3),
        "embedded": summary["counts"]["embedded"],
        "write_s": round(summary["timings"]["write_s"], 3),
    }


def rounds(work: Path, setup: str, tenants_path: Path, count: int) -> dict[str, Any]:
    out = []
    for i in range(count):
        order = (False, True) if i % 2 == 0 else (True, False)
        pair = {
            w: first_sweep(work, f"{setup}-{i}-{'waves' if w else 'serial'}", tenants_path, w)
            for w in order
        }
        out.append(
            {
                "serial_s": pair[False]["seconds"],
                "waves_s": pair[True]["seconds"],
                "serial_over_waves": round(pair[False]["seconds"] / pair[True]["seconds"], 3),
            }
        )
        print(setup, out[-1], file=sys.stderr)
    return {
        "rounds": out,
        "serial_over_waves_median": round(
            statistics.median(r["serial_over_waves"] for r in out), 3
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--latency-ms", type=float, default=40.0)
    args = parser.parse_args()

    from neo_assets_tests.fakes.supervisor import FaultServerSupervisor

    work = Path(tempfile.mkdtemp(prefix="neo-bench-waves-"))
    repo = work / "repo"
    generate_repo(repo, args.files)
    tenants_path = work / "tenants.yaml"
    tenants_path.write_text(
        "tenants:\n  - id: bench\n    repos:\n      - slug: gen\n"
        f"        path: {repo}\n        parser: {{id: neo-code, version: 1.0.0}}\n"
    )
    for name in [n for n in os.environ if n.startswith("NEO_")]:
        del os.environ[name]
    results: dict[str, Any] = {}
    results["local"] = rounds(work, "local", tenants_path, args.rounds)

    control = {"latency_s": args.latency_ms / 1000.0, "slots": 4}
    with FaultServerSupervisor(work / "server", dimensions=DIMS, control=control) as srv:
        os.environ.update(
            {
                "NEO_EMBEDDING_PROVIDER": "openai_compatible",
                "NEO_EMBEDDING_BASE_URL": srv.base_url,
                "NEO_EMBEDDING_MODEL": "fault-embed",
                "NEO_EMBEDDING_DIMENSIONS": str(DIMS),
                "NEO_EMBEDDING_MAX_INFLIGHT": "4",
            }
        )
        results["remote"] = rounds(work, "remote", tenants_path, args.rounds)
    print(
        json.dumps(
            {
                "bench": "waves",
                "files": args.files,
                "latency_ms": args.latency_ms,
                **results,
                "load_average_1min": round(os.getloadavg()[0], 2),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
