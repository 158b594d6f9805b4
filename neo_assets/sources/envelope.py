"""Repository envelopes: the revision of a repository and every path in it, each marked
yielded (handed to the parser) or skipped with a recorded reason.

Two kinds of root:

- **git** — ``root`` is the top of a git work tree (it holds ``.git``). The revision is
  the commit sha of ``ref`` (default ``HEAD``); the tree is listed and read *at that
  commit* through git (``ls-tree``, one long-lived ``cat-file --batch``), so dirty,
  untracked and ignored work-tree files are never seen.
- **dir** — anything else, including a *subdirectory* of a git work tree (walked as plain
  files: dirty, untracked and ignored files included; declare the work tree's top with
  exclude globs to get git semantics). The revision is a content digest: sha256 over every
  path with its content's sha256, or its skip reason and size when its content was not
  read (mtimes do not count; ``blob`` is the content's sha256). The walk never
  follows a symlink (a symlinked directory is listed, not entered, so loops cannot hang),
  opens every component relative to the root with ``O_NOFOLLOW`` (nothing outside the root
  is ever opened, even if the tree changes mid-walk), and never opens a fifo, socket or
  device. ``.git`` entries (nested repositories) are listed as excluded, never entered.

Skip reasons (codes.SKIP_*), in the order they are decided: unreadable for a path that
is not valid UTF-8 or not a safe relative path; excluded (by a glob, or a ``.git`` entry;
the content is not read); symlink (never followed); submodule / not-regular-file;
too-large (over ``max_file_bytes``; not read); unreadable (permissions, vanished, missing
git object; ``skip_detail`` says which); binary (a NUL byte in the first 8 KiB).
Excluded directories are still walked so that every path is listed.

Errors: ``SourceError`` with codes.SOURCE_REPO_MISSING (the root does not exist or is not a
directory, ``ref`` names no commit, ``ref`` given for a non-git root) or
codes.SOURCE_UNREADABLE (git missing or unable to read the repository, a file changed
between the envelope and the read). Each message names the root, the ref and the fix.

This module is the dispatch; the model is model.py, the readers git_reader.py and
dir_reader.py.
"""

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
    """Envelope ``root``: git when it is the top of a work tree, a plain directory
    otherwise (see the module docstring). ``ref`` is only allowed for git roots.

    ``previous`` (git only): the repo's last envelope. A path whose object id is unchanged
    keeps its content classification (binary or not) and change time without reading its
    blob again, so a sweep after a small commit reads only what changed. Exclusion, mode
    and size rules are applied afresh whenever they differ from those ``previous`` was
    listed with (a changed glob is heard at once); at the same commit under the same
    rules, ``previous`` is the envelope and the tree is not listed again; at another
    commit under the same rules, ``previous`` is carried by what git diff-tree lists
    between the two commits (only the changed paths are listed and classified)."""
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
    """Yield ``(path, text)`` for each of ``paths`` in order, streaming.

    Every path must be yielded by the envelope (ValueError otherwise). Git content comes
    from the envelope's blob through one ``cat-file --batch`` process; dir content is
    re-read under the root with the same no-follow rules and must still match the
    envelope's digest (SourceError SOURCE_UNREADABLE otherwise: re-envelope and retry).
    """
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
