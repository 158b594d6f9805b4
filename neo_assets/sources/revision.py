"""The current revision of a declared repo, cheaply: what the sensor compares."""

from collections.abc import Sequence
from pathlib import Path

from neo_assets.sources.envelope import resolve_revision
from neo_assets.sources.model import SourceError


def current_revision(
    path: Path, ref: str | None, exclude: Sequence[str], max_file_bytes: int
) -> str | None:
    """The commit sha of ``ref`` (git) or the content digest (plain directory); None when
    the repo cannot be read now: not a reason to be due (the sweep itself reports why)."""
    try:
        return resolve_revision(path, ref=ref, exclude=exclude, max_file_bytes=max_file_bytes)
    except SourceError:
        return None
