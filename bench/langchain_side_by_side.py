"""Ours against LangChain's ``index()`` on the same chunks, same embedder, same Chroma.

Needs the optional extra: ``pip install -e '.[langchain]'``.

A generated git repository is chunked once by neo-code; LangChain indexes exactly those
chunks (as Documents keyed by source path) with a SQLRecordManager, once with
``cleanup="incremental"`` and once with ``cleanup="scoped_full"``, into its own Chroma
collection with the same hashing embedder. Ours runs the sweep's steps (envelope, chunks,
embeddings, census — parsing and git included, which LangChain is not charged for in the
headline ratios; ``*_with_parse_over_ours`` beside them charges it the reading and
splitting of the same Documents). Each is measured on a first ingest (the median of
``--rounds`` rounds on empty stores), a no-op re-run and a re-run after 1 % of the files
changed. Last stdout line: one JSON object with the times and ratios (LangChain / ours:
above 1 means ours is faster).

    python -m bench.langchain_side_by_side [--files 2000] [--rounds 3]
"""

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file (python bench/x.py): the repo root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.sweep import generate_repo, git  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="first ingests to take the median of")
    args = parser.parse_args()
    try:
        from langchain_chroma import Chroma
        from langchain_classic.indexes import SQLRecordManager, index
        from langchain_core.documents import Document
        from langchain_core.embeddings import Embeddings
    except ImportError as exc:
        print(
            json.dumps(
                {
                    "bench": "langchain_side_by_side",
                    "skipped": f"{exc}; install the extra: pip install -e '.[langchain]'",
                }
            )
        )
        return 0

    work = Path(tempfile.mkdtemp(prefix="neo-bench-lc-"))
    os.environ["NEO_HOME"] = str(work / "home")
    repo = work / "repo"
    generate_repo(repo, args.files)
    tenants_path = work / "tenants.yaml"
    tenants_path.write_text(
        "tenants:\n  - id: bench\n    repos:\n      - slug: gen\n"
        f"        path: {repo}\n        parser: {{id: neo-code, version: 1.0.0}}\n"
    )

    import numpy as np
    from chromadb.api.shared_system_client import SharedSystemClient

    from neo_assets.config.settings import load_settings
    from neo_assets.embedding.providers.hashing import HashingProvider, hash_embed
    from neo_assets.services import handles
    from neo_assets.sweep.context import RepoContext
    from neo_assets.sweep.run import StageEnded, SweepInputs, run_sweep
    from neo_assets.tenants.validation import load_tenants

    tenant = load_tenants(tenants_path).tenants[0]
    ctx = RepoContext(tenant=tenant, repo=tenant.repos[0])
    current: dict[str, object] = {}

    def fresh_round(i: int) -> None:
        """Empty stores on both sides: our home (ledger + Chroma) and their collections.
        The last round's handles are dropped first, so the re-runs that follow the last
        round see a process like one that ran a single round."""
        if "store" in current:
            current["store"].close()
            current["ledger"].dispose()
        current.clear()
        SharedSystemClient.clear_system_cache()
        gc.collect()
        os.environ["NEO_HOME"] = str(work / f"home-{i}")
        current["settings"] = load_settings()
        # Opened once per round, as one process's sweeps of one home would hold them.
        current["ledger"] = handles.open_ledger(current["settings"])
        current["store"] = handles.open_store(current["settings"])
        current["stores"] = {}
        for mode in ("incremental", "scoped_full"):
            vs = Chroma(
                collection_name=f"lc-{mode.replace('_', '-')}",
                embedding_function=HashingEmbeddings(),
                persist_directory=str(work / f"lc-chroma-{mode}-{i}"),
                collection_configuration={"hnsw": {"space": "cosine"}},
            )
            rm = SQLRecordManager(
                f"lc/{mode}", db_url=f"sqlite:///{work / f'lc-{mode}-{i}.sqlite'}"
            )
            rm.create_schema()
            current["stores"][mode] = (vs, rm)

    def ours() -> tuple[float, "object"]:
        settings = current["settings"]
        ledger, store = current["ledger"], current["store"]
        t0 = time.perf_counter()
        summaries: list[object] = []

        def keep_summary(event: object) -> None:
            if isinstance(event, StageEnded) and event.stage == "kb_embeddings":
                summaries.append(event.summary)

        # The sweep the asset runs (sweep/run.py), without Dagster.
        run_sweep(
            SweepInputs(
                ctx=ctx,
                settings=settings,
                ledger=ledger,
                open_store=lambda: store,
                provider=HashingProvider(),
                run_id=f"bench-{time.monotonic_ns()}",
            ),
            keep_summary,
        )
        summary = summaries[-1]
        return time.perf_counter() - t0, summary

    class HashingEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return np.vstack([hash_embed(t, 384) for t in texts]).tolist()

        def embed_query(self, text: str) -> list[float]:
            return hash_embed(text, 384).tolist()

    def documents() -> list:
        """The same chunks ours declares, read back from the repo at HEAD."""
        from neo_assets.sources.envelope import build_envelope, read_texts
        from neo_assets.sources.parsers.neo_code import chunk_file

        env = build_envelope(repo, max_file_bytes=current["settings"].sweep.max_file_bytes)
        docs = []
        for path, text in read_texts(env, env.yielded_paths()):
            for ch in chunk_file("bench", "gen", path, text, "neo-code", "1.0.0").chunks:
                docs.append(Document(page_content=ch.content, metadata={"source": path}))
        return docs

    def theirs(mode: str) -> tuple[float, float, dict]:
        """Their index() time, and apart from it the time to read and split the files into
        the same Documents (charged to no one in the headline ratios)."""
        vs, rm = current["stores"][mode]
        t0 = time.perf_counter()
        docs = documents()
        read_parse_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        # Their batch is ours (Chroma's per-add cost is then paid as often on both sides).
        batch = current["settings"].embedding.resolved_batch_size
        result = index(docs, rm, vs, cleanup=mode, source_id_key="source", batch_size=batch)
        return time.perf_counter() - t0, read_parse_s, dict(result)

    figures: dict[str, dict] = {}

    def phase(name: str, theirs_first: bool = False) -> dict:
        row: dict = {}
        if theirs_first:
            row.update(their_rows())
        ours_s, summary = ours()
        row.update({"ours_s": round(ours_s, 3), "ours_embedded": summary.counts.embedded})
        if not theirs_first:
            row.update(their_rows())
        for mode in ("incremental", "scoped_full"):
            row[f"{mode}_over_ours"] = round(row[f"{mode}_s"] / ours_s, 3)
            # Beside it: theirs charged with producing the same chunks, as ours is.
            row[f"{mode}_with_parse_over_ours"] = round(
                (row[f"{mode}_s"] + row[f"{mode}_read_parse_s"]) / ours_s, 3
            )
        print(name, row, file=sys.stderr)
        return row

    def their_rows() -> dict:
        row: dict = {}
        for mode in ("incremental", "scoped_full"):
            s, read_parse_s, result = theirs(mode)
            row[f"{mode}_s"] = round(s, 3)
            row[f"{mode}_read_parse_s"] = round(read_parse_s, 3)
            row[f"{mode}_result"] = result
        return row

    # A first ingest is ~10 s of Chroma add, which varies by +-15 % from call to call: it
    # is measured in ``--rounds`` rounds, each on empty stores, alternating which side goes
    # first; the ratios are the medians. The re-runs follow the last round.
    rounds = []
    for i in range(max(1, args.rounds)):
        fresh_round(i)
        rounds.append(phase(f"first_ingest[{i}]", theirs_first=i % 2 == 1))
    figures["first_ingest"] = {
        **rounds[-1],
        **{
            key: round(statistics.median(r[key] for r in rounds), 3)
            for mode in ("incremental", "scoped_full")
            for key in (f"{mode}_over_ours", f"{mode}_with_parse_over_ours")
        },
        "rounds": [{k: v for k, v in r.items() if not k.endswith("_result")} for r in rounds],
    }
    figures["noop_rerun"] = phase("noop_rerun")
    changed = sorted(repo.glob("pkg*/mod_*.py"))[::100][: max(1, args.files // 100)]
    for path in changed:
        path.write_text(path.read_text() + "\n\ndef changed_later(x):\n    return x\n")
    git(repo, "commit", "-q", "-am", "1% changed")
    figures["one_percent_changed"] = phase("one_percent_changed")

    out = {
        "bench": "langchain_side_by_side",
        "files": args.files,
        "changed_files": len(changed),
        **figures,
        "ours_faster_on_each": all(
            figures[p][f"{m}_over_ours"] > 1
            for p in figures
            for m in ("incremental", "scoped_full")
        ),
        "ours_faster_on_each_with_their_parse_charged": all(
            figures[p][f"{m}_with_parse_over_ours"] > 1
            for p in figures
            for m in ("incremental", "scoped_full")
        ),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
