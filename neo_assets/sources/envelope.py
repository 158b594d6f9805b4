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
"""

import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from neo_assets.core import codes
from neo_assets.core.sources.path_rules import (
    check_exclude_glob,
    decode_text,
    is_excluded,
)
from neo_assets.sources.git_reader import git_envelope, git_read_texts, git_top_commit
from neo_assets.sources.model import (
    Envelope,
    FileEntry,
    SourceError,
    classify_content,
    yielded_entry,
)

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


# --------------------------------------------------------------------------- dispatch


def build_envelope(
    root: str | Path,
    *,
    ref: str | None = None,
    exclude: Sequence[str] = (),
    max_file_bytes: int,
    previous: "Envelope | None" = None,
    on_new_files: Callable[[int], None] | None = None,
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
    between the two commits (only the changed paths are listed and classified).

    ``on_new_files`` (git only) hears how many candidate files have content the previous
    envelope does not know, before they are read: a sweep can start what parsing them
    will need while the envelope is still reading."""
    top, commit = _dispatch(root, ref, exclude, max_file_bytes)
    if commit is not None:
        reuse = previous if previous is not None and previous.kind == "git" else None
        return git_envelope(
            top, ref or "HEAD", commit, tuple(exclude), max_file_bytes, reuse, on_new_files
        )
    return _dir_envelope(top, tuple(exclude), max_file_bytes)


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
    return _dir_envelope(top, tuple(exclude), max_file_bytes).revision


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
        yield from _dir_read_texts(envelope, paths)


# --------------------------------------------------------------------------- shared


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


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- plain dir


def _open_dir_under(root_fd: int, rel: str) -> int:
    """A directory fd for ``rel`` under the root, never following a symlink."""
    fd = os.dup(root_fd)
    try:
        for part in rel.split("/") if rel else ():
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_regular(dir_fd: int, name: str, limit: int) -> bytes | str:
    """At most ``limit`` + 1 bytes of the regular file ``name`` in ``dir_fd``, or a skip
    reason when it is not a regular file at open time (it may have changed since it was
    listed). Opening is O_NOFOLLOW | O_NONBLOCK, so a symlink or fifo swapped in is
    neither followed nor waited on. OSError propagates."""
    fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return codes.SKIP_NOT_REGULAR
        chunks: list[bytes] = []
        remaining = limit + 1
        while remaining > 0:
            block = os.read(fd, min(remaining, 1 << 20))
            if not block:
                break
            chunks.append(block)
            remaining -= len(block)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _os_detail(exc: OSError) -> str:
    return f"{type(exc).__name__}: {exc.strerror or exc}"


def _dir_envelope(top: str, exclude: tuple[str, ...], cap: int) -> Envelope:
    entries: dict[str, FileEntry] = {}

    def record(entry: FileEntry) -> None:
        entries.setdefault(entry.path, entry)

    root_fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        pending = [""]
        while pending:
            rel_dir = pending.pop()
            try:
                dir_fd = _open_dir_under(root_fd, rel_dir)
            except OSError as exc:
                record(
                    FileEntry(rel_dir, 0, "", False, codes.SKIP_UNREADABLE, None, _os_detail(exc))
                )
                continue
            try:
                _walk_one_dir(dir_fd, rel_dir, exclude, cap, record, pending)
            finally:
                os.close(dir_fd)
    finally:
        os.close(root_fd)

    ordered = tuple(entries[p] for p in sorted(entries))
    return Envelope(kind="dir", root=top, revision=_dir_digest(ordered), entries=ordered)


def _walk_one_dir(
    dir_fd: int,
    rel_dir: str,
    exclude: tuple[str, ...],
    cap: int,
    record: Callable[[FileEntry], None],
    pending: list[str],
) -> None:
    prefix = f"{rel_dir}/" if rel_dir else ""
    try:
        listing = sorted(os.scandir(dir_fd), key=lambda d: d.name)
    except OSError as exc:
        record(FileEntry(rel_dir, 0, "", False, codes.SKIP_UNREADABLE, None, _os_detail(exc)))
        return
    for item in listing:
        name = item.name
        try:
            name.encode("utf-8")
            path, unusable = prefix + name, None
        except UnicodeEncodeError:
            raw = os.fsencode(name)
            path, unusable = (
                prefix + raw.decode("utf-8", errors="replace"),
                "path is not valid UTF-8",
            )
        try:
            st = item.stat(follow_symlinks=False)
        except OSError as exc:
            record(FileEntry(path, 0, "", False, codes.SKIP_UNREADABLE, None, _os_detail(exc)))
            continue
        if stat.S_ISDIR(st.st_mode) and unusable is None and name != ".git":
            pending.append(path)  # excluded dirs are still listed: every path is recorded
            continue
        record(_classify_dir_item(dir_fd, name, path, unusable, st, exclude, cap))


def _classify_dir_item(
    dir_fd: int,
    name: str,
    path: str,
    unusable: str | None,
    st: os.stat_result,
    exclude: tuple[str, ...],
    cap: int,
) -> FileEntry:
    def skip(reason: str, detail: str | None = None) -> FileEntry:
        return FileEntry(path, st.st_size, "", False, reason, st.st_mtime, detail)

    if unusable is not None:
        return skip(codes.SKIP_UNREADABLE, unusable)
    if name == ".git":
        return skip(codes.SKIP_EXCLUDED, "git metadata is not content")
    if is_excluded(path, exclude):
        return skip(codes.SKIP_EXCLUDED)
    if stat.S_ISLNK(st.st_mode):
        return skip(codes.SKIP_SYMLINK)
    if not stat.S_ISREG(st.st_mode):
        return skip(codes.SKIP_NOT_REGULAR)
    if st.st_size > cap:
        return skip(codes.SKIP_TOO_LARGE)
    try:
        data = _read_regular(dir_fd, name, cap)
    except OSError as exc:
        return skip(codes.SKIP_UNREADABLE, _os_detail(exc))
    if isinstance(data, str):
        return skip(data)
    if len(data) > cap:
        return skip(codes.SKIP_TOO_LARGE)  # grew after it was listed
    reason = classify_content(data)
    return FileEntry(path, len(data), _sha256(data), reason is None, reason, st.st_mtime)


def _dir_digest(entries: tuple[FileEntry, ...]) -> str:
    """sha256 over every path with its content digest, or its skip reason and size when
    the content was not read: any change to what the envelope says moves the revision."""
    pairs = [[e.path, e.blob if e.blob else f"{e.skip_reason}:{e.size}"] for e in entries]
    payload = json.dumps(pairs, ensure_ascii=False, separators=(",", ":"))
    return _sha256(payload.encode("utf-8"))


def _dir_read_texts(envelope: Envelope, paths: Iterable[str]) -> Iterator[tuple[str, str]]:
    root_fd = os.open(envelope.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for path in paths:
            entry = yielded_entry(envelope, path)
            parent, _, name = path.rpartition("/")
            try:
                dir_fd = _open_dir_under(root_fd, parent)
                try:
                    data = _read_regular(dir_fd, name, entry.size)
                finally:
                    os.close(dir_fd)
            except OSError as exc:
                data = _os_detail(exc)
            if isinstance(data, str) or _sha256(data) != entry.blob:
                why = data if isinstance(data, str) else "its content changed"
                raise SourceError(
                    codes.SOURCE_UNREADABLE,
                    f"directory {envelope.root} (revision {envelope.revision}): {path!r} "
                    f"can no longer be read as enveloped ({why}). Fix: re-run the sweep so "
                    "the envelope is rebuilt from the current files.",
                )
            yield path, decode_text(data)
    finally:
        os.close(root_fd)
