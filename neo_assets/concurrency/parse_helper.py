"""Parsing many files on both cores: the second half in a helper process.

A first sweep parses every file before anything is embedded, on one core while the other
idles. With at least ``HELP_MIN_FILES`` files, a helper (started at once, ~0.1 s) parses
the second half while this process parses the first; the rows come back in file order,
exactly as parsing them all here would give them (same code), and a helper that is not
there in time or fails leaves its half to this process.
"""

import threading
from collections.abc import Iterable
from dataclasses import astuple, dataclass
from typing import Any

from neo_assets.concurrency.helper_process import HelperProcess, HelperUnavailable, run_helper
from neo_assets.sources.parsers.neo_code import chunk_file_result

# Below this, the helper's start-up costs more than half the parse saves.
HELP_MIN_FILES = 200
# How long the helper may take to start before its half is parsed here instead.
READY_WAIT_S = 2.0

# (chunk_id, source_path, kind, name, start_line, end_line, content,
#  language, qualified_name, parent, fallback_reason): plain values, so they cross the pipe
#  to the helper cheaply. ``parent`` is "" when the chunk has none; ``fallback_reason`` is
#  the file's (every chunk of a windowed file carries it), "" when it was read by structure.
Row = tuple[str, str, str, str, int, int, str, str, str, str, str]


@dataclass(frozen=True)
class ParseIdentity:
    """Everything besides a file's path and text that decides its chunks."""

    tenant_id: str
    repo_slug: str
    parser_id: str
    parser_version: str
    max_chunk_chars: int
    window_lines: int


def parse_rows(identity: ParseIdentity, files: list[tuple[str, str]]) -> list[Row]:
    """The chunks of ``files`` (path, text), in order, as plain rows."""
    rows: list[Row] = []
    for path, text in files:
        result = chunk_file_result(
            identity.tenant_id,
            identity.repo_slug,
            path,
            text,
            identity.parser_id,
            identity.parser_version,
            max_chunk_chars=identity.max_chunk_chars,
            window_lines=identity.window_lines,
        )
        reason = result.fallback_reason or ""
        for ch in result.chunks:
            row = (ch.chunk_id, ch.source_path, ch.kind, ch.name, ch.start_line, ch.end_line)
            meta = (ch.language, ch.qualified_name, ch.parent or "", reason)
            rows.append((*row, ch.content, *meta))
    return rows


def parse_files(
    identity: ParseIdentity,
    files: Iterable[tuple[str, str]],
    count: int,
    *,
    help_min_files: int = HELP_MIN_FILES,
) -> tuple[list[Row], bool]:
    """``parse_rows`` of the ``count`` files (path, text) that ``files`` yields; with enough
    files, the helper is started before they are read (it boots meanwhile) and parses the
    second half. Returns the rows and whether the helper parsed its half."""
    if count < help_min_files:
        return parse_rows(identity, list(files)), False
    with Parser(identity) as parser:
        return parser.parse_shared(list(files))


class Parser:
    """Parses batch after batch of files in one helper process, started at once and used
    from the first batch (waiting up to ``READY_WAIT_S`` for it); a batch the helper
    cannot take is parsed here. Close it (or use ``with``)."""

    def __init__(self, identity: ParseIdentity) -> None:
        self.identity = identity
        self.helper = HelperProcess(__name__)

    def ask(
        self, files: list[tuple[str, str]], *, wait_ready_s: float = READY_WAIT_S
    ) -> list[Row] | None:
        """The helper's rows for ``files``, or None when it cannot take them (or is still
        starting after ``wait_ready_s``)."""
        if self.helper.broken is not None:
            return None
        try:
            return self.helper.call(
                (astuple(self.identity), files),
                wait_ready_s=wait_ready_s,
                # ~0.3 ms a file here; far more means the helper is stuck, not busy.
                answer_within_s=10.0 + 0.02 * len(files),
            )
        except HelperUnavailable:
            return None

    def parse(
        self, files: list[tuple[str, str]], *, wait_ready_s: float = READY_WAIT_S
    ) -> tuple[list[Row], bool]:
        """The rows of ``files``, and whether the helper parsed them."""
        rows = self.ask(files, wait_ready_s=wait_ready_s)
        if rows is None:
            return parse_rows(self.identity, files), False
        return rows, True

    def parse_shared(
        self, files: list[tuple[str, str]], *, wait_ready_s: float = READY_WAIT_S
    ) -> tuple[list[Row], bool]:
        """The rows of ``files`` parsed on both cores: the helper takes the second half
        while this thread parses the first (and the second too, if the helper cannot).
        Returns the rows, in file order, and whether the helper parsed its half."""
        split = (len(files) + 1) // 2
        box: dict[str, Any] = {}
        asking = threading.Thread(
            target=lambda: box.update(rows=self.ask(files[split:], wait_ready_s=wait_ready_s)),
            name="parse-helper",
            daemon=True,
        )
        asking.start()
        first = parse_rows(self.identity, files[:split])
        asking.join()
        second = box.get("rows")
        if second is None:
            return first + parse_rows(self.identity, files[split:]), False
        return first + second, True

    def close(self) -> None:
        self.helper.close()

    def __enter__(self) -> "Parser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handle(request: tuple[tuple[Any, ...], list[tuple[str, str]]]) -> list[Row]:
    fields, files = request
    return parse_rows(ParseIdentity(*fields), files)


if __name__ == "__main__":
    run_helper(_handle)
