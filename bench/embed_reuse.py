"""Benchmark: each content embedded once per generation, counted (not timed).

A generated repository (bench/sweep.py's builder, ``--files`` Python modules of three
functions each, parser neo-code 2.0.0) is swept through the sweep's own steps on the
embedded default (real git, real Chroma, the hashing embedder counting the texts it is
sent), then changed three ways, each followed by one sweep:

- a parser bump with unchanged content (2.0.0 -> 2.0.1: every chunk id changes);
- a rename of 10 files (moved to another directory);
- a one-line edit of one function in one file.

For each: chunks the sweep had to write (ids the collection lacked), texts sent to the
provider, vectors copied from rows with the same input, and, as the baseline measured in
the same run, what the same change sends with copying turned off
(``NEO_EMBEDDING_REUSE_VECTORS=false``, a fresh knowledge base). Last stdout line: one
JSON object.

    python -m bench.embed_reuse [--files 2000]
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: the repo root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from bench.sweep import GIT_ENV, generate_repo, git

TENANTS = (
    "tenants:\n  - id: bench\n    repos:\n      - slug: gen\n"
    "        path: {repo}\n        parser: {{id: neo-code, version: {version}}}\n"
)


def counting_provider() -> Any:
    from neo_assets.embedding.providers.hashing import HashingProvider

    class Counting(HashingProvider):
        def __init__(self) -> None:
            super().__init__()
            self.sent = 0

        async def embed(self, texts: Sequence[str], cancel_scope: Any, label: str) -> np.ndarray:
            self.sent += len(texts)
            return await super().embed(texts, cancel_scope, label)

    return Counting()


def sweep(work: Path, version: str) -> dict[str, int]:
    """One sweep of the repo declared at parser ``version``: its counts and texts sent."""
    from neo_assets.config.settings import load_settings
    from neo_assets.services.handles import open_ledger, open_store
    from neo_assets.sweep.census import census_step
    from neo_assets.sweep.chunk import chunk_step
    from neo_assets.sweep.context import RepoContext
    from neo_assets.sweep.embed import embed_step
    from neo_assets.sweep.embed_plan import EmbedContext
    from neo_assets.sweep.envelope import envelope_step
    from neo_assets.tenants.validation import load_tenants

    (work / "tenants.yaml").write_text(TENANTS.format(repo=work / "repo", version=version))
    settings = load_settings()
    tenant = load_tenants(work / "tenants.yaml").tenants[0]
    ctx = RepoContext(tenant=tenant, repo=tenant.repos[0])
    provider = counting_provider()
    with open_ledger(settings) as ledger, open_store(settings) as store:
        now = time.time()
        env = envelope_step(ctx, settings, ledger, now)
        chunks = chunk_step(ctx, settings, ledger, env, now)
        summary = embed_step(
            ctx, settings, store, ledger, env, chunks, EmbedContext(provider=provider)
        )
        doc = census_step(ctx, settings, ledger, env, summary, now)
    counts = doc["counts"]
    assert doc["outcome"] == "complete", doc
    return {
        "chunks": int(counts["chunks"]),
        "to_write": int(counts["chunks"]) - int(counts["alreadyPresent"]),
        "sent": provider.sent,
        "copied": int(counts.get("reused", 0)),
    }


def scenario(root: Path, files: int, reuse: bool) -> dict[str, Any]:
    work = root / ("reuse" if reuse else "baseline")
    os.environ["NEO_HOME"] = str(work / "home")
    os.environ["NEO_TENANTS_FILE"] = str(work / "tenants.yaml")
    os.environ["NEO_EMBEDDING_REUSE_VECTORS"] = "true" if reuse else "false"
    repo = work / "repo"
    generate_repo(repo, files)
    out: dict[str, Any] = {"first": sweep(work, "2.0.0")}
    out["parser_bump"] = sweep(work, "2.0.1")
    for i in range(10):
        (repo / "moved").mkdir(exist_ok=True)
        src = repo / f"pkg{i % 40:02d}" / f"mod_{i:05d}.py"
        shutil.move(src, repo / "moved" / f"renamed_{i:05d}.py")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "rename 10 files")
    out["rename_10_files"] = sweep(work, "2.0.1")
    target = repo / "pkg20" / "mod_00020.py"
    text = target.read_text()
    target.write_text(
        text.replace("    return total if total > 1", "    return total if total > 2", 1)
    )
    git(repo, "commit", "-q", "-am", "one-line edit")
    out["one_line_edit"] = sweep(work, "2.0.1")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    args = parser.parse_args()
    for name, value in GIT_ENV.items():
        os.environ.setdefault(name, value)
    with tempfile.TemporaryDirectory(prefix="bench-reuse-") as tmp:
        root = Path(tmp)
        reuse = scenario(root, args.files, reuse=True)
        baseline = scenario(root, args.files, reuse=False)
    figures = {
        "bench": "embed_reuse",
        "files": args.files,
        "reuse": reuse,
        "baseline_no_copy": baseline,
        "sent_ratio": {
            k: (reuse[k]["sent"] / baseline[k]["sent"]) if baseline[k]["sent"] else None
            for k in ("parser_bump", "rename_10_files", "one_line_edit")
        },
    }
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
