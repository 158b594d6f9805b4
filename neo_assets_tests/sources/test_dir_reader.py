"""The plain-directory reader (sources/dir_reader.py): every path walked under the root,
nothing outside it ever opened."""

import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from neo_assets.core import codes
from neo_assets.sources.envelope import build_envelope, read_texts
from neo_assets.sources.model import SourceError
from neo_assets_tests.sources.trees import CAP, reasons


@pytest.mark.timeout(30)
def test_plain_directory_marks_every_path(plain: Path) -> None:
    env = build_envelope(plain, exclude=["vendor/**"], max_file_bytes=CAP)
    assert env.kind == "dir"
    assert re.fullmatch(r"[0-9a-f]{64}", env.revision)
    assert reasons(env) == {
        "big.txt": codes.SKIP_TOO_LARGE,
        "blob.bin": codes.SKIP_BINARY,
        "dos sier/é.md": None,
        "inner-link": codes.SKIP_SYMLINK,
        "latin1.txt": None,
        "leak": codes.SKIP_SYMLINK,
        "nested/.git": codes.SKIP_EXCLUDED,
        "nested/kept.txt": None,
        "outside-dir": codes.SKIP_SYMLINK,
        "pipe": codes.SKIP_NOT_REGULAR,
        "src/app.py": None,
        "src/loop": codes.SKIP_SYMLINK,
        "src/up": codes.SKIP_SYMLINK,
        "vendor/lib.js": codes.SKIP_EXCLUDED,
    }
    texts = dict(read_texts(env, env.yielded_paths()))
    assert texts["latin1.txt"] == "caf\ufffd\n"
    assert texts["src/app.py"] == "VALUE = 1\n"
    assert texts["dos sier/é.md"] == "# é\n"
    app = env.entry("src/app.py")
    assert app is not None
    assert app.blob == hashlib.sha256(b"VALUE = 1\n").hexdigest()
    assert app.changed_at == os.lstat(plain / "src/app.py").st_mtime


@pytest.mark.timeout(30)
def test_plain_directory_never_opens_what_a_symlink_points_at(tmp_path: Path) -> None:
    # The link's target is a fifo outside the root: opening it would block forever, so
    # finishing at all proves it was never opened.
    fifo = tmp_path / "outside.fifo"
    os.mkfifo(fifo)
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(fifo, root / "trap")
    (root / "a.txt").write_text("a\n")
    env = build_envelope(root, exclude=[], max_file_bytes=CAP)
    assert reasons(env) == {"a.txt": None, "trap": codes.SKIP_SYMLINK}


def test_plain_revision_is_a_content_digest(plain: Path) -> None:
    first = build_envelope(plain, exclude=["vendor/**"], max_file_bytes=CAP)
    os.utime(plain / "src/app.py", (0, 0))  # mtime alone does not move the revision
    assert build_envelope(plain, exclude=["vendor/**"], max_file_bytes=CAP).revision == (
        first.revision
    )
    (plain / "src/app.py").write_text("VALUE = 2\n")
    second = build_envelope(plain, exclude=["vendor/**"], max_file_bytes=CAP)
    assert second.revision != first.revision
    (plain / "src/app.py").write_text("VALUE = 1\n")
    third = build_envelope(plain, exclude=["vendor/**"], max_file_bytes=CAP)
    assert third.revision == first.revision
    (plain / "added.txt").write_text("new\n")
    assert build_envelope(plain, exclude=["vendor/**"], max_file_bytes=CAP).revision != (
        first.revision
    )


def test_plain_read_refuses_changed_or_swapped_files(plain: Path, outside: Path) -> None:
    env = build_envelope(plain, exclude=[], max_file_bytes=CAP)
    (plain / "src/app.py").write_text("VALUE = 'changed'\n")
    with pytest.raises(SourceError) as caught:
        list(read_texts(env, ["src/app.py"]))
    assert caught.value.code == codes.SOURCE_UNREADABLE
    # a directory swapped for a symlink to the outside after the envelope
    (plain / "dos sier/é.md").unlink()
    (plain / "dos sier").rmdir()
    os.symlink(outside, plain / "dos sier")
    (outside / "é.md").write_text("# é\n")  # same content, but outside the root
    try:
        with pytest.raises(SourceError) as caught:
            list(read_texts(env, ["dos sier/é.md"]))
    finally:
        (outside / "é.md").unlink()
    assert caught.value.code == codes.SOURCE_UNREADABLE
    (plain / "latin1.txt").unlink()
    with pytest.raises(SourceError):
        list(read_texts(env, ["latin1.txt"]))


def test_plain_non_utf8_name_is_unreadable_not_a_crash(tmp_path: Path) -> None:
    with open(os.path.join(os.fsencode(tmp_path), b"bad-\xff.txt"), "wb") as handle:
        handle.write(b"x\n")
    env = build_envelope(tmp_path, exclude=[], max_file_bytes=CAP)
    (entry,) = env.entries
    assert entry.path == "bad-\ufffd.txt"
    assert entry.skip_reason == codes.SKIP_UNREADABLE
    assert entry.skip_detail == "path is not valid UTF-8"


def _reasons_as_unprivileged_user(root: Path) -> dict[str, list[str | None]]:
    """Root reads files whatever their mode, so envelope in a forked child that dropped
    to 'nobody' (a subprocess could not even start: the interpreter lives under /root)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        status = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            env = build_envelope(root, exclude=[], max_file_bytes=CAP)
            payload = {e.path: [e.skip_reason, e.skip_detail] for e in env.entries}
            os.write(write_end, json.dumps(payload).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return json.loads(data)


@pytest.mark.timeout(60)
def test_plain_unreadable_file_and_directory() -> None:
    base = Path(tempfile.mkdtemp(prefix="neo-unreadable-"))
    try:
        base.chmod(0o755)
        (base / "ok.txt").write_text("ok\n")
        (base / "locked.txt").write_text("x\n")
        (base / "locked-dir").mkdir()
        (base / "locked-dir/a.txt").write_text("a\n")
        for p in (base / "ok.txt", base / "locked-dir/a.txt"):
            p.chmod(0o644)
        (base / "locked.txt").chmod(0)
        (base / "locked-dir").chmod(0)
        if os.geteuid() == 0:
            got = _reasons_as_unprivileged_user(base)
        else:
            env = build_envelope(base, exclude=[], max_file_bytes=CAP)
            got = {e.path: [e.skip_reason, e.skip_detail] for e in env.entries}
    finally:
        (base / "locked-dir").chmod(stat.S_IRWXU)
        (base / "locked.txt").chmod(stat.S_IRUSR | stat.S_IWUSR)
        shutil.rmtree(base)
    assert set(got) == {"ok.txt", "locked.txt", "locked-dir"}
    assert got["ok.txt"] == [None, None]
    for path in ("locked.txt", "locked-dir"):
        reason, detail = got[path]
        assert reason == codes.SKIP_UNREADABLE
        assert detail is not None and "PermissionError" in detail


def test_plain_empty_directory(tmp_path: Path) -> None:
    env = build_envelope(tmp_path, exclude=[], max_file_bytes=CAP)
    assert env.kind == "dir" and env.entries == ()
    assert list(read_texts(env, [])) == []
