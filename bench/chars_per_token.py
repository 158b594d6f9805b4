"""Calibrate the chars-per-token estimate against a real tokenizer on real code.

Where a provider has no tokenizer the lane can use (a remote server without a tokenize
endpoint, Gemini), the band is estimated: ``ceil(chars / NEO_EMBEDDING_CHARS_PER_TOKEN)``
tokens under the ``NEO_EMBEDDING_ADMISSION_SAFETY`` margin. This measures, for the
chunks the parser cuts from real repositories (the sweep's embedding inputs, headers
included), how many characters one token of the bundled all-MiniLM-L6-v2 (a BERT word
piece tokenizer) covers: overall, and at the 1st/5th percentile (dense code: the
estimate must not undercount those), and how many chunks the default estimate (3.0)
(3.0, the old default) and the calibrated one (2.3) would undercount, with and without
the default margin (0.9).

    python -m bench.chars_per_token [--repo PATH ...]   (default: this repo and flask)

Last stdout line: one JSON object.
"""

import argparse
import json
import math
from pathlib import Path

import numpy as np

CALIBRATED = 2.3  # config/settings.py's estimate for providers without a tokenizer
DEFAULT_REPOS = [Path(__file__).resolve().parent.parent, Path("/tmp/bench-repos/flask")]


def _chunks(repo: Path) -> list[str]:
    from neo_assets.embedding.rules.input import embedding_input  # noqa: PLC0415
    from neo_assets.sources.parsers.neo_code import chunk_file  # noqa: PLC0415

    texts = []
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo).as_posix()
        if not path.is_file() or rel.startswith((".git/", ".venv/")) or "/." in "/" + rel:
            continue
        if path.suffix not in {".py", ".md", ".rst", ".txt", ".toml", ".yaml", ".yml", ".html"}:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for c in chunk_file(
            tenant_id="t",
            repo_slug="r",
            source_path=rel,
            text=text,
            parser_id="neo-code",
            parser_version="2.0.0",
        ).chunks:
            texts.append(
                embedding_input(
                    c.content,
                    kind=c.kind,
                    name=c.name,
                    qualified_name=c.qualified_name,
                    source_path=rel,
                    parser_version="2.0.0",
                )
            )
    return texts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", type=Path, action="append")
    args = parser.parse_args()
    from neo_assets.embedding.providers.sentence_transformers import count_tokens  # noqa: PLC0415

    out: dict[str, object] = {"bench": "chars_per_token", "tokenizer": "all-MiniLM-L6-v2"}
    repos = {}
    for repo in args.repo or DEFAULT_REPOS:
        if not repo.exists():
            continue
        texts = _chunks(repo)
        tokens = np.asarray(count_tokens(None, texts), dtype=float)
        chars = np.asarray([len(t) for t in texts], dtype=float)
        ratio = chars / tokens
        at = {}
        for cpt in (3.0, CALIBRATED):
            estimate = np.asarray([math.ceil(c / cpt) for c in chars])
            at[cpt] = (int((estimate < tokens).sum()), int((estimate * (1 / 0.9) < tokens).sum()))
        repos[repo.name] = {
            "chunks": len(texts),
            "charsPerToken": round(float(chars.sum() / tokens.sum()), 3),
            "p1": round(float(np.percentile(ratio, 1)), 3),
            "p5": round(float(np.percentile(ratio, 5)), 3),
            "median": round(float(np.median(ratio)), 3),
            # Chunks whose real count exceeds the estimate, bare and with the margin
            # (admitted at estimate <= 0.9 x limit: safe while tokens <= estimate / 0.9).
            "undercountAt3": at[3.0][0],
            "undercountAt3UnderMargin": at[3.0][1],
            "undercountAtCalibrated": at[CALIBRATED][0],
            "undercountAtCalibratedUnderMargin": at[CALIBRATED][1],
        }
    out["repos"] = repos
    print(json.dumps(out))


if __name__ == "__main__":
    main()
