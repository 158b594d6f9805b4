"""The plain-directory reader: a directory walked and read as plain files under its root,
never following a symlink; envelope.py dispatches here."""

import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator

from neo_assets.core import codes
from neo_assets.sources.model import (
    Envelope,
    FileEntry,
    SourceError,
    classify_content,
    yielded_entry,
)
from neo_assets.sources.rules.path_rules import decode_text, is_excluded

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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


def dir_envelope(top: str, exclude: tuple[str, ...], cap: int) -> Envelope:
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


def dir_read_texts(envelope: Envelope, paths: Iterable[str]) -> Iterator[tuple[str, str]]:
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
