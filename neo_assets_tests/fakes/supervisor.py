"""A small supervisor for the fault server, like a container restart policy.

It starts ``neo_assets_tests.fakes.fault_server`` as a subprocess on a free 127.0.0.1
port, waits until it answers, restarts it on the same port after it dies (a short
configurable delay; ``restarts`` counts them), switches it between listening and
refusing, and stops everything on exit. Modes and counters live in a state dir, so
they survive a restart of the server process.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from neo_assets_tests.fakes.fault_server import (
    CONTROL_FILE,
    DEFAULT_CONTROL,
    READY_FILE,
    STATS_FILE,
    read_json,
    write_json_atomic,
)

_REPO_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class FaultServerSupervisor:
    """Runs one fault server; restarts it after death while ``restart`` is on."""

    def __init__(
        self,
        state_dir: Path,
        *,
        dimensions: int = 64,
        restart: bool = True,
        restart_delay_s: float = 0.05,
        ready_timeout_s: float = 20.0,
        port: int | None = None,
        control: dict[str, Any] | None = None,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.dimensions = dimensions
        self.restart = restart
        self.restart_delay_s = restart_delay_s
        self.ready_timeout_s = ready_timeout_s
        self.port = port or free_port()
        self.restarts = 0
        self.exit_codes: list[int] = []
        self._lock = threading.RLock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopping = False
        self._monitor: threading.Thread | None = None
        self._restarted = threading.Condition(self._lock)
        self._control_version = 0
        if control is not None or not (self.state_dir / CONTROL_FILE).exists():
            self._write_control({**DEFAULT_CONTROL, **(control or {})})

    # --- lifecycle
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        with self._lock:
            return None if self._proc is None else self._proc.pid

    def start(self) -> "FaultServerSupervisor":
        with self._lock:
            self._stopping = False
            self._spawn()
        self._monitor = threading.Thread(target=self._watch, daemon=True, name="fault-supervisor")
        self._monitor.start()
        return self

    def _spawn(self) -> None:
        (self.state_dir / READY_FILE).unlink(missing_ok=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(_REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        log = open(self.state_dir / "server.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "neo_assets_tests.fakes.fault_server",
                    "--port",
                    str(self.port),
                    "--state-dir",
                    str(self.state_dir),
                    "--dimensions",
                    str(self.dimensions),
                ],
                cwd=_REPO_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        finally:
            log.close()
        self._wait_ready(self._proc)

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            ready = read_json(self.state_dir / READY_FILE)
            if ready is not None and ready.get("pid") == proc.pid:
                return
            if proc.poll() is not None:
                raise RuntimeError(f"fault server exited during start: {self._log_tail()}")
            time.sleep(0.01)
        raise RuntimeError(f"fault server not ready in {self.ready_timeout_s}s: {self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            return (self.state_dir / "server.log").read_text()[-2000:]
        except OSError:
            return ""

    def _watch(self) -> None:
        while True:
            with self._lock:
                proc = self._proc
            if proc is None:
                return
            code = proc.wait()
            with self._lock:
                if self._stopping or proc is not self._proc:
                    return
                self.exit_codes.append(code)
                if not self.restart:
                    self._proc = None
                    self._restarted.notify_all()
                    return
            time.sleep(self.restart_delay_s)
            with self._lock:
                if self._stopping:
                    return
                try:
                    self._spawn()
                except RuntimeError:
                    self._proc = None
                    self._restarted.notify_all()
                    return
                self.restarts += 1
                self._restarted.notify_all()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._monitor is not None and self._monitor is not threading.current_thread():
            self._monitor.join(timeout=5)

    def __enter__(self) -> "FaultServerSupervisor":
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def kill(self) -> None:
        """SIGKILL the server from outside (an OOM kill); the restart policy still applies."""
        with self._lock:
            proc = self._proc
        if proc is not None:
            proc.kill()

    def wait_for_restarts(self, count: int, timeout_s: float = 20.0) -> None:
        """Block until at least ``count`` restarts happened and the server is ready."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self.restarts < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{self.restarts} restarts, wanted {count}")
                self._restarted.wait(remaining)

    def wait_down(self, timeout_s: float = 20.0) -> None:
        """Block until the server died and stays down (restart off, or a restart failed)."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._proc is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("the fault server is still up")
                self._restarted.wait(remaining)

    # --- control
    def _write_control(self, control: dict[str, Any]) -> None:
        write_json_atomic(self.state_dir / CONTROL_FILE, control)

    def control(self) -> dict[str, Any]:
        return {**DEFAULT_CONTROL, **(read_json(self.state_dir / CONTROL_FILE) or {})}

    def configure(self, wait: bool = True, **changes: Any) -> None:
        """Merge ``changes`` into the control file; with ``wait``, until the server applied it."""
        with self._lock:
            current = self.control()
            version = int(current.get("version", 0)) + 1
            self._write_control({**current, **changes, "version": version})
        if wait and self.pid is not None:
            self.wait_for(
                lambda s: (
                    s.get("control_version", -1) >= version
                    and s.get("listening") == (not self.control().get("refuse"))
                ),
                what=f"control version {version} applied",
            )

    def reset(self) -> None:
        """Back to answering normally (counters are kept: tests compare deltas)."""
        self.configure(**{k: v for k, v in DEFAULT_CONTROL.items() if k != "version"})

    def refuse(self) -> None:
        """Stop listening: new connections are refused until ``resume``."""
        self.configure(refuse=True)

    def resume(self) -> None:
        self.configure(refuse=False)

    def bodies(self) -> bytes:
        """Every request body the server received while ``record_bodies`` was on."""
        try:
            return (self.state_dir / "bodies.log").read_bytes()
        except FileNotFoundError:
            return b""

    # --- counters
    def stats(self) -> dict[str, Any]:
        data = read_json(self.state_dir / STATS_FILE)
        return data if data is not None else {}

    def wait_for(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        timeout_s: float = 10.0,
        what: str = "condition",
    ) -> dict[str, Any]:
        """Poll the counters until ``predicate`` holds; the stats that satisfied it."""
        deadline = time.monotonic() + timeout_s
        while True:
            stats = self.stats()
            if stats and predicate(stats):
                return stats
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{what} not reached; stats: {json.dumps(stats)[:2000]}")
            time.sleep(0.01)

    def wait_idle(self, timeout_s: float = 10.0) -> dict[str, Any]:
        """Until the server holds no open request."""
        return self.wait_for(lambda s: s.get("open_requests") == 0, timeout_s, "no open requests")
