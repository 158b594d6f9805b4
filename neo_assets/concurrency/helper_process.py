"""A helper process for CPU work that should not share the sweep's GIL.

Chroma's ``add`` holds the GIL for its whole run, and the sweep's own Python work (parsing,
hashing) would otherwise queue behind it; a second process runs on the other core. A
helper is a plain ``python -m <module>`` child whose module calls ``run_helper(handle)``: no
multiprocessing start method re-imports the parent's ``__main__`` (for a Dagster run
that is all of Dagster) and no fork copies a threaded process.

A helper can make work faster, never wrong or stuck: ``call`` raises ``HelperUnavailable``
whenever the caller should do the work in-process itself (still starting, broken, or
closed), and every caller does. Requests and answers are length-prefixed pickles over the
child's stdin/stdout (both ends are this package). End of stdin ends the child, so it
never outlives the process that started it.
"""

import contextlib
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO

_READY = b"R"
_OK = b"\x00"
_ERR = b"\x01"
_LEN = struct.Struct("!Q")

# A helper does its work on one thread. numpy's BLAS would otherwise start a thread per
# core at import, and that start-up (~0.1 s of CPU) competed with the sweep it helps.
_ONE_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class HelperUnavailable(Exception):
    """Do the work in-process instead (the message says why)."""


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    chunks = []
    while n:
        got = stream.read(n)
        if not got:
            raise EOFError("the other side closed the pipe")
        chunks.append(got)
        n -= len(got)
    return b"".join(chunks)


def _write_frame(stream: BinaryIO, status: bytes, body: bytes) -> None:
    stream.write(status + _LEN.pack(len(body)))
    stream.write(body)
    stream.flush()


def serve(handle: Callable[[Any], Any], stdin: BinaryIO, stdout: BinaryIO) -> None:
    """The child's loop: one answer per request, in order, until stdin ends."""
    stdout.write(_READY)
    stdout.flush()
    while True:
        try:
            (size,) = _LEN.unpack(_read_exact(stdin, _LEN.size))
            request = pickle.loads(_read_exact(stdin, size))
        except EOFError:
            return
        try:
            body = pickle.dumps(handle(request), protocol=pickle.HIGHEST_PROTOCOL)
            _write_frame(stdout, _OK, body)
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which falls back
            _write_frame(stdout, _ERR, f"{type(exc).__name__}: {exc}".encode())


def run_helper(handle: Callable[[Any], Any]) -> None:
    """A helper module's main: serve this process's stdin and stdout (at the lower CPU
    priority its parent gave it, see ``HelperProcess``), then end the process at once.

    Ending at once: its answers are flushed and it holds nothing else, so the
    interpreter's shutdown (20-60 ms, with numpy loaded) was only time its parent spent
    waiting in ``close``."""
    serve(handle, sys.stdin.buffer, sys.stdout.buffer)
    os._exit(0)


# The cores this process's helpers run on (None: wherever the parent may). A process
# whose embedded Chroma threads share one core keeps its helpers off that core
# (concurrency/chroma_threads.py): a helper scheduled there took CPU from Chroma's add.
_helper_cores: frozenset[int] | None = None
_live: "weakref.WeakSet[HelperProcess]" = weakref.WeakSet()
_live_lock = threading.Lock()


def keep_helpers_on(cores: Iterable[int] | None) -> None:
    """Run this process's helpers, those alive and those to come, on ``cores`` only
    (None or empty: on any core this process may use)."""
    global _helper_cores
    chosen = frozenset(cores or ())
    with _live_lock:
        _helper_cores = chosen or None
        live = list(_live)
    for helper in live:
        helper._pin()


class HelperProcess:
    """One child running ``python -m module *args``, started without waiting for it.
    Thread-safe, one request at a time."""

    def __init__(self, module: str, *args: str) -> None:
        self._lock = threading.Lock()
        self._ready = False
        self._broken: str | None = None
        # The answer deadline of the call in progress (see _overdue).
        self._calls = 0
        self._finished = 0
        self._answering = False
        self._deadline: threading.Timer | None = None
        package_root = Path(__file__).resolve().parents[2]
        existing = os.environ.get("PYTHONPATH")
        path = f"{package_root}{os.pathsep}{existing}" if existing else str(package_root)
        self._proc = subprocess.Popen(  # noqa: S603 - our own module, fixed arguments
            [sys.executable, "-m", module, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=package_root,
            env={**os.environ, **_ONE_THREAD_ENV, "PYTHONPATH": path},
        )
        with _live_lock:
            _live.add(self)
        self._pin()

    @property
    def broken(self) -> str | None:
        return self._broken

    def _pin(self) -> None:
        if not hasattr(os, "sched_setaffinity") or self._proc.returncode is not None:
            return
        with contextlib.suppress(OSError):  # it ended, or we may not: it runs anywhere
            os.sched_setaffinity(self._proc.pid, _helper_cores or os.sched_getaffinity(0))

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _check_ready(self, wait_s: float) -> bool:
        if self._ready:
            return True
        assert self._proc.stdout is not None
        # poll, not select: select refuses a descriptor numbered 1024 or more, which a
        # long-lived process (a Dagster code server, the test suite) reaches.
        poller = select.poll()
        poller.register(self._proc.stdout, select.POLLIN)
        readable = poller.poll(max(0.0, wait_s) * 1000)
        if not readable:
            if self._proc.poll() is not None:
                self._broken = f"helper exited with {self._proc.returncode} before it was ready"
            return False
        first = self._proc.stdout.read(1)
        if first != _READY:
            if not first:  # end of its output: it exited (e.g. an import failed)
                try:
                    code = self._proc.wait(timeout=5)
                    self._broken = f"helper exited with {code} before it was ready"
                except subprocess.TimeoutExpired:
                    self._broken = "helper closed its output before it was ready"
            else:
                self._broken = f"helper did not start (it wrote {first!r})"
            self._kill()
            return False
        self._ready = True
        return True

    def call(self, request: Any, *, answer_within_s: float, wait_ready_s: float = 0.0) -> Any:
        """The child's answer to ``request``. Waits up to ``wait_ready_s`` for a child that
        is still starting; HelperUnavailable when it is not there to answer. A child that
        has not answered within ``answer_within_s`` is killed (so the work is done
        in-process, never waited on forever: a hung helper must not look like a slow
        provider, whose timeouts are evidence against the inputs)."""
        with self._lock:
            if self._broken is not None or not self._check_ready(wait_ready_s):
                raise HelperUnavailable(self._broken or "starting")
            assert self._proc.stdin is not None and self._proc.stdout is not None
            self._calls += 1
            self._answering = False
            self._arm_deadline(self._calls, answer_within_s, may_extend=True)
            try:
                payload = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
                self._proc.stdin.write(_LEN.pack(len(payload)))
                self._proc.stdin.write(payload)
                self._proc.stdin.flush()
                status = _read_exact(self._proc.stdout, 1)
                self._answering = True
                (size,) = _LEN.unpack(_read_exact(self._proc.stdout, _LEN.size))
                body = _read_exact(self._proc.stdout, size)
            except (OSError, EOFError, ValueError) as exc:
                self._broken = self._broken or f"helper pipe failed: {exc}"
                self._kill()
                raise HelperUnavailable(self._broken) from exc
            finally:
                self._finished = self._calls  # this call's deadlines do nothing now
                if self._deadline is not None:
                    self._deadline.cancel()
            if status != _OK:
                raise HelperUnavailable(body.decode(errors="replace"))
            try:
                return pickle.loads(body)
            except Exception as exc:  # noqa: BLE001 - a garbled answer: stop using it
                self._broken = f"helper answer unreadable: {exc}"
                self._kill()
                raise HelperUnavailable(self._broken) from exc

    def _arm_deadline(self, call: int, seconds: float, *, may_extend: bool) -> None:
        timer = threading.Timer(seconds, self._overdue, args=(call, seconds, may_extend))
        timer.daemon = True
        self._deadline = timer
        timer.start()

    def _overdue(self, call: int, seconds: float, may_extend: bool) -> None:
        if self._finished >= call:
            return  # answered meanwhile (a timer cancelled too late still lands here)
        # This timer needs the GIL, which an embedded Chroma add holds for seconds: it can
        # fire when the add ends, with the answer already in the pipe, unread only because
        # the reading thread waited for the GIL too. A child that has begun to answer gets
        # one more period; one that has not, or is still not done after it, is killed.
        if may_extend and (self._answering or self._answer_waiting()):
            self._arm_deadline(call, seconds, may_extend=False)
            return
        self._broken = f"helper did not answer within {seconds:g} s"
        self._kill()

    def _answer_waiting(self) -> bool:
        if self._proc.stdout is None:
            return False
        try:
            poller = select.poll()
            poller.register(self._proc.stdout, select.POLLIN)
            return any(events & select.POLLIN for _, events in poller.poll(0))
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        """End the child: close its stdin (it exits on EOF), kill it if it lingers."""
        self._broken = self._broken or "closed"
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self._kill()
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    def _kill(self) -> None:
        try:
            self._proc.kill()
            self._proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass

    def __enter__(self) -> "HelperProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
