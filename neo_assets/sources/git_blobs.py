"""A commit's blobs read through git: their sizes from one ``cat-file --batch-check``,
their bytes from long-lived ``cat-file --batch`` processes (two at once for many)."""

import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import IO

from neo_assets.core import codes
from neo_assets.sources.git_commands import git_argv, git_env, git_stderr
from neo_assets.sources.model import SourceError

# Blobs are read by this many ``cat-file`` processes at once when there are at least
# PARALLEL_READ_MIN of them: git inflates each loose object on one core, and on a first
# sweep that read was most of the envelope.
BLOB_READERS = 2
PARALLEL_READ_MIN = 256


def read_blobs(
    top: str, wanted: Sequence[tuple[str, str]], visit: Callable[[str, bytes | None], None]
) -> None:
    """``visit(path, bytes or None)`` for each ``(path, object id)`` of ``wanted``,
    streaming (no blob is held here). With many blobs, contiguous parts are read by
    ``BLOB_READERS`` processes at once, and ``visit`` is called from as many threads, in
    order within a part; the first error of any part is raised once all have ended."""

    def read(part: Sequence[tuple[str, str]]) -> None:
        with CatFile(top) as cat:
            answers = cat.read_many([oid for _, oid in part])
            for (path, _oid), (_, data) in zip(part, answers, strict=True):
                visit(path, data)

    if not wanted:
        return  # nothing new: no git process at all
    readers = BLOB_READERS if len(wanted) >= PARALLEL_READ_MIN else 1
    step = -(-len(wanted) // readers)
    parts = [wanted[i : i + step] for i in range(0, len(wanted), step)]
    if len(parts) <= 1:
        read(wanted)
        return
    errors: list[BaseException] = []

    def read_part(part: Sequence[tuple[str, str]]) -> None:
        try:
            read(part)
        except BaseException as exc:  # noqa: BLE001 - raised below, in the caller
            errors.append(exc)

    others = [
        threading.Thread(target=read_part, args=(part,), name="git-blob-reader", daemon=True)
        for part in parts[1:]
    ]
    for thread in others:
        thread.start()
    read_part(parts[0])
    for thread in others:
        thread.join()
    if errors:
        raise errors[0]


class CatFile:
    """One long-lived ``git cat-file --batch``: raw blob bytes by object id, in request
    order (no filters, no textconv: exactly what the commit holds)."""

    def __init__(self, top: str) -> None:
        self._top = top
        self._proc = subprocess.Popen(
            git_argv(top, "cat-file", "--batch"),
            env=git_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._stdin: IO[bytes] = self._proc.stdin
        self._stdout: IO[bytes] = self._proc.stdout

    def read_many(self, oids: Sequence[str]) -> Iterator[tuple[str, bytes | None]]:
        """Each blob's bytes (or None), in order. A feeder thread writes every request
        ahead, so git answers back to back instead of one round trip per blob (on a first
        sweep of 2,000 files that wait was most of reading them)."""

        def feed() -> None:
            try:
                for oid in oids:
                    self._stdin.write(oid.encode("ascii") + b"\n")
                self._stdin.flush()
            except (OSError, ValueError):
                pass  # git exited (or we closed it): the reader reports what it lacks

        feeder = threading.Thread(target=feed, name="git-cat-file-feed", daemon=True)
        feeder.start()
        answered = 0
        try:
            for oid in oids:
                yield oid, self._answer(oid)
                answered += 1
        finally:
            if answered < len(oids):
                # The reader stopped early: git may be blocked writing answers nobody
                # reads, and the feeder blocked writing requests git no longer reads.
                self._proc.kill()
            feeder.join()

    def _answer(self, oid: str) -> bytes | None:
        header = self._stdout.readline()
        if not header.endswith(b"\n"):
            raise SourceError(
                codes.SOURCE_UNREADABLE,
                f"repository {self._top}: git cat-file stopped answering at {oid}. Fix: "
                "check the repository with git fsck.",
            )
        parts = header.split()
        if len(parts) != 3:
            return None  # "<oid> missing" / "<oid> ambiguous"
        size = int(parts[2])
        data = self._stdout.read(size)
        self._stdout.read(1)  # the newline after the content
        if len(data) != size:
            raise SourceError(
                codes.SOURCE_UNREADABLE,
                f"repository {self._top}: git cat-file returned a truncated {oid}.",
            )
        return data if parts[1] == b"blob" else None

    def close(self) -> None:
        try:
            self._stdin.close()  # git ends at end of input
        except BrokenPipeError:
            pass  # git is gone already (killed after an early stop, or it failed)
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._stdout.close()

    def __enter__(self) -> "CatFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def blob_sizes(top: str, oids: set[str]) -> dict[str, int]:
    """Sizes by object id from one ``git cat-file --batch-check`` (object headers only).
    A missing object is left out (``ls-tree -l`` shows it as BAD); its read then finds it
    missing and skips the path as unreadable."""
    if not oids:
        return {}
    done = subprocess.run(
        git_argv(top, "cat-file", "--batch-check"),
        env=git_env(),
        input="".join(f"{oid}\n" for oid in sorted(oids)).encode("ascii"),
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise SourceError(
            codes.SOURCE_UNREADABLE,
            f"repository {top}: git cat-file --batch-check failed: {git_stderr(done)}. "
            "Fix: check the repository with git fsck.",
        )
    sizes: dict[str, int] = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == b"blob" and parts[2].isdigit():
            sizes[parts[0].decode("ascii")] = int(parts[2])
    return sizes
