"""Repository envelopes: the revision of a repository and every path in it, each yielded
(handed to the parser) or skipped with a recorded reason. A git root is read at its
commit, never the work tree; any other root is walked as plain files, never leaving it.
This module dispatches; the model is model.py, the readers git_reader.py and dir_reader.py.
Design: docs/design/sources.md#envelope"""

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from neo_assets.core import codes
from neo_assets.sources.dir_reader import dir_envelope, dir_read_texts
from neo_assets.sources.git_reader import git_envelope, git_read_texts, git_top_commit
from neo_assets.sources.model import Envelope, SourceError
from neo_assets.sources.rules.path_rules import check_exclude_glob


def build_envelope(
    root: str | Path,
    *,
    ref: str | None = None,
    exclude: Sequence[str] = (),
    max_file_bytes: int,
    previous: "Envelope | None" = None,
) -> Envelope:
    """Envelope ``root``: git when it is the top of a work tree, a plain directory otherwise
    (``ref`` only for git). ``previous`` (git): the repo's last envelope, so only what changed
    is listed and read again (docs/design/sources.md#envelope)."""
    top, commit = _dispatch(root, ref, exclude, max_file_bytes)
    if commit is not None:
        reuse = previous if previous is not None and previous.kind == "git" else None
        return git_envelope(top, ref or "HEAD", commit, tuple(exclude), max_file_bytes, reuse)
    return dir_envelope(top, tuple(exclude), max_file_bytes)


def resolve_revision(
    root: str | Path,
    *,
    ref: str | None = None,
    exclude: Sequence[str] = (),
    max_file_bytes: int,
) -> str:
    """``build_envelope(...).revision`` at the least cost: one ``rev-parse`` for git
    (no tree listing), the full content walk for a plain directory. Same dispatch and
    errors as ``build_envelope``; for a sensor deciding whether a repo moved."""
    top, commit = _dispatch(root, ref, exclude, max_file_bytes)
    if commit is not None:
        return commit
    return dir_envelope(top, tuple(exclude), max_file_bytes).revision


def _dispatch(
    root: str | Path, ref: str | None, exclude: Sequence[str], max_file_bytes: int
) -> tuple[str, str | None]:
    """(resolved root, the commit ``ref`` names when the root is read through git, else
    None), after validating the settings."""
    if max_file_bytes <= 0:
        raise ValueError(f"max_file_bytes must be positive, got {max_file_bytes}")
    for pattern in exclude:
        problem = check_exclude_glob(pattern)
        if problem is not None:
            raise ValueError(f"exclude glob {pattern!r}: {problem}")
    top = _resolve_root(root, ref)
    commit = git_top_commit(top, ref)
    if commit is not None:
        return top, commit
    if ref is not None:
        raise SourceError(
            codes.SOURCE_REPO_MISSING,
            f"repository {top}: ref {ref!r} is declared but {top} is not the top of a git "
            "work tree. Fix: point path at the work tree's top (the folder holding .git), "
            "or remove ref: for a plain directory.",
        )
    return top, None


def read_texts(envelope: Envelope, paths: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Yield ``(path, text)`` for each of ``paths`` (each yielded by the envelope, else
    ValueError), streaming. Dir content must still match the envelope's digest, else
    SourceError SOURCE_UNREADABLE (re-envelope and retry)."""
    if envelope.kind == "git":
        yield from git_read_texts(envelope, paths)
    else:
        yield from dir_read_texts(envelope, paths)


def _resolve_root(root: str | Path, ref: str | None) -> str:
    top = os.path.realpath(root)
    if not os.path.isdir(top):
        raise SourceError(
            codes.SOURCE_REPO_MISSING,
            f"repository {root} (ref {ref or 'HEAD'!r}): no such directory. Fix: correct "
            "the repo's path in tenants.yaml (relative paths resolve against the file's "
            "folder), or create/clone the repository there.",
        )
    return top
