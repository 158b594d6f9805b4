"""Whether what a repo serves is behind its declared head (pure). Only a git repo reports a
head (a directory's digest costs a full walk); otherwise ``behind`` is None, never False."""

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Head:
    """The declared ref's commit now, its commit time (epoch s) and when the service first
    saw it there (epoch s): ``behindSince`` is the commit time, else the first sight."""

    revision: str
    committed_at: float | None
    first_seen_at: float


def freshness(indexed: str | None, head: Head | None) -> dict[str, Any]:
    """``{"revision", "behind", "head", "behindSince"}`` for a repo indexed at
    ``indexed`` whose declared ref names ``head`` now (None: not known)."""
    if head is None:
        return {"revision": indexed, "behind": None, "head": None, "behindSince": None}
    if indexed == head.revision:
        return {"revision": indexed, "behind": False, "head": head.revision, "behindSince": None}
    since = head.committed_at if head.committed_at is not None else head.first_seen_at
    return {"revision": indexed, "behind": True, "head": head.revision, "behindSince": since}
