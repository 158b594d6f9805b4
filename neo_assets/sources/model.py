"""The envelope model: SourceError, FileEntry and Envelope, and the helpers both
readers (git_reader.py, dir_reader.py) share."""

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from neo_assets.core import codes
from neo_assets.sources.rules.path_rules import looks_binary


class SourceError(Exception):
    """A repository could not be enveloped or read; ``code`` is a codes.SOURCE_* constant."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class FileEntry(NamedTuple):
    """One path of the tree. ``blob``: the git object id, or the content's sha256 (dir; empty
    when not read). ``changed_at``: last commit time (git) or mtime, None when unobserved.
    A tuple: every sweep builds one per path, twice."""

    path: str
    size: int
    blob: str
    yielded: bool
    skip_reason: str | None
    changed_at: float | None
    skip_detail: str | None = None


@dataclass(frozen=True)
class Envelope:
    """The authority on path membership at one revision; entries sorted by path."""

    kind: Literal["git", "dir"]
    root: str
    revision: str
    entries: tuple[FileEntry, ...]
    # git: the bytes of text blobs read while classifying them, by object id (a blob
    # never changes); ``read_texts`` takes them from here instead of asking git again.
    read_ahead: dict[str, bytes] = field(default_factory=dict, compare=False, repr=False)
    # git: the digest of the rules that listed it (sources/rules/envelope_reuse.py); "" for dir.
    rules: str = ""

    def yielded_paths(self) -> tuple[str, ...]:
        return tuple(e.path for e in self.entries if e.yielded)

    def all_paths(self) -> tuple[str, ...]:
        return tuple(e.path for e in self.entries)

    def entry(self, path: str) -> FileEntry | None:
        return self._index().get(path)

    def skip_counts(self) -> dict[str, int]:
        """Skipped paths per reason (only reasons that occur), sorted by reason."""
        counts = Counter(e.skip_reason for e in self.entries if e.skip_reason is not None)
        return dict(sorted(counts.items()))

    def _index(self) -> dict[str, FileEntry]:
        cached = self.__dict__.get("_by_path")
        if cached is None:
            cached = {e.path: e for e in self.entries}
            object.__setattr__(self, "_by_path", cached)
        return cached


def classify_content(data: bytes) -> str | None:
    """The skip reason the content alone decides (binary), or None: it is text."""
    return codes.SKIP_BINARY if looks_binary(data) else None


def yielded_entry(envelope: Envelope, path: str) -> FileEntry:
    """The entry of ``path``, which the envelope must yield (ValueError otherwise)."""
    entry = envelope.entry(path)
    if entry is None or not entry.yielded:
        raise ValueError(f"{path!r} is not a yielded path of the envelope of {envelope.root}")
    return entry
