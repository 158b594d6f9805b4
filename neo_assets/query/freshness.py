"""The declared head of each repo, read from git and cached a few seconds, so a search
does not run git each time (the rule, indexed vs head, is ``query.rules.freshness``)."""

import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from neo_assets.query.rules.freshness import Head
from neo_assets.sources.git_reader import git_top_commit
from neo_assets.sources.model import SourceError

# How long a head read from git is trusted before git is asked again.
HEAD_TTL_S = 5.0


def read_head(path: Path, ref: str | None, now: float) -> Head | None:
    """The commit ``ref`` names in the git work tree at ``path`` and its commit time; None
    for a plain directory or a repo git cannot read now."""
    top = os.path.realpath(path)
    try:
        commit = git_top_commit(top, ref)
    except (SourceError, OSError):
        return None
    if commit is None:
        return None
    committed_at: float | None = None
    try:
        done = subprocess.run(
            ["git", "-C", top, "show", "-s", "--format=%ct", commit],
            capture_output=True,
            timeout=10,
            check=False,
        )
        if done.returncode == 0 and done.stdout.strip().isdigit():
            committed_at = float(done.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        pass
    return Head(commit, committed_at, now)


class HeadCache:
    """Heads by (path, ref), each read at most once per ``ttl_s``; a head seen before
    keeps the time it was first seen."""

    def __init__(
        self, ttl_s: float = HEAD_TTL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self._heads: dict[tuple[str, str | None], tuple[float, Head | None]] = {}
        self._lock = threading.Lock()

    def head(self, path: Path, ref: str | None) -> Head | None:
        key = (str(path), ref)
        with self._lock:
            found = self._heads.get(key)
        if found is not None and self.clock() - found[0] < self.ttl_s:
            return found[1]
        head = read_head(path, ref, time.time())
        if head is not None and found is not None and found[1] is not None:
            if found[1].revision == head.revision:  # the same head: first seen earlier
                head = found[1]
        with self._lock:
            self._heads[key] = (self.clock(), head)
        return head
