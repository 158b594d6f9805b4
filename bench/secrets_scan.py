"""The secret scan's cost per 1,000 chunks and its fences on real repos (issue 36).

    python -m bench.secrets_scan [--detect-secrets-path DIR]

For flask, cobra, ky and neomjs/neo (src/) at /tmp/bench-repos: the envelope with the
default secret-file globs (files never read), the chunks the sweep would cut (parser
neo-code 2.0.0, default settings), the scan of every chunk timed, and the `secret` fences
it would make (target 0 on these four: each one is printed with path, line and rule).
Then every planted kind of neo_assets_tests/secrets/planted.py (target: all caught).
With ``--detect-secrets-path`` (a ``pip install --target`` of detect-secrets), the same
chunks through detect-secrets' default plugins, for comparison (docs/security-secrets.md).
Last stdout line: one JSON object with the figures.
"""

import argparse
import json
import sys
import time
from pathlib import Path

from neo_assets.config.settings import load_settings
from neo_assets.secrets.rules import DEFAULT_SECRET_FILE_GLOBS, scan
from neo_assets.sources.envelope import build_envelope, read_texts
from neo_assets.sources.parsing import ParseIdentity, parse_rows
from neo_assets_tests.secrets.planted import PLANTED

REPOS = {"flask": "", "cobra": "", "ky": "", "neo": "src/"}
ROOT = Path("/tmp/bench-repos")


def chunks_of(name: str, prefix: str) -> tuple[list[tuple[str, int, str]], list[str]]:
    settings = load_settings()
    env = build_envelope(
        ROOT / name, exclude=DEFAULT_SECRET_FILE_GLOBS, max_file_bytes=settings.sweep.max_file_bytes
    )
    skipped = [
        e.path
        for e in env.entries
        if not e.yielded and e.path.startswith(prefix) and e.skip_reason == "excluded"
    ]
    paths = [p for p in env.yielded_paths() if p.startswith(prefix)]
    identity = ParseIdentity(
        "bench",
        name,
        "neo-code",
        "2.0.0",
        settings.sweep.max_chunk_chars,
        settings.sweep.window_lines,
    )
    rows = parse_rows(identity, list(read_texts(env, paths)))
    return [(r[1], r[4], r[6]) for r in rows], skipped


def detect_secrets_scan(chunks: list[tuple[str, int, str]]) -> tuple[float, int]:
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    started = time.perf_counter()
    flagged = 0
    with default_settings():
        for _path, _start, text in chunks:
            if any(True for line in text.splitlines() for _ in scan_line(line)):
                flagged += 1
    return time.perf_counter() - started, flagged


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--detect-secrets-path")
    args = ap.parse_args()
    if args.detect_secrets_path:
        sys.path.insert(0, args.detect_secrets_path)
    figures: dict[str, object] = {}
    total_chunks = 0
    total_s = 0.0
    for name, prefix in REPOS.items():
        chunks, skipped = chunks_of(name, prefix)
        started = time.perf_counter()
        fences = []
        for path, start, text in chunks:
            found = scan(text, path)
            if found:
                fences.append((path, start + found[0].line - 1, found[0].rule))
        elapsed = time.perf_counter() - started
        total_chunks += len(chunks)
        total_s += elapsed
        for fence in fences:
            print(f"{name}: secret fence {fence[0]}:{fence[1]} {fence[2]}", file=sys.stderr)
        entry: dict[str, object] = {
            "chunks": len(chunks),
            "secretFences": len(fences),
            "secretFilesSkipped": len(skipped),
            "msPer1000Chunks": round(1000 * elapsed / max(1, len(chunks)) * 1000, 2),
        }
        if args.detect_secrets_path:
            ds_s, ds_flagged = detect_secrets_scan(chunks)
            entry["detectSecrets"] = {
                "flaggedChunks": ds_flagged,
                "msPer1000Chunks": round(1000 * ds_s / max(1, len(chunks)) * 1000, 2),
            }
        figures[name] = entry
        print(f"{name}: {json.dumps(entry)} skipped files: {skipped}", file=sys.stderr)
    caught = sum(
        1
        for path, text, rule, line in PLANTED
        if (rule, line) in {(f.rule, f.line) for f in scan(text, path)}
    )
    figures["planted"] = {"kinds": len(PLANTED), "caught": caught}
    figures["msPer1000Chunks"] = round(1000 * total_s / max(1, total_chunks) * 1000, 2)
    figures["falseFences"] = sum(int(figures[n]["secretFences"]) for n in REPOS)  # type: ignore[index]
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
