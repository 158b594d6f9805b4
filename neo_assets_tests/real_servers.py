"""Real llama.cpp embedding servers for tests, on 127.0.0.1 only, with small limits.

    with running(LlamaServer(tmp_path, slots=2)) as srv:      # llama.cpp's llama-server
        provider = OpenAICompatibleProvider(base_url=srv.base_url, ...)
    with running(LlamaCppPythonServer(tmp_path)) as srv:     # python -m llama_cpp.server
        ...
    with running(LlamaServer(tmp_path), supervise=True) as srv:
        srv.kill()                                  # SIGKILL; the supervisor restarts it

Both serve the bundled all-MiniLM-L6-v2 converted to GGUF (``minilm-f16.gguf``). The
artifacts are built by ``.ci/build-llama`` into ``$NEO_LLAMA_CACHE`` (default
``~/.cache/neo-assets/llama``); ``require_*`` skip a test, naming that script, only when
they are absent (CI runs the script first, so CI never skips).

How they differ (docs/REAL-WORLD in the issue; README "Real servers"):

- ``llama-server -m gguf --embedding --pooling mean -c 1024 -ub 512 -b 512 --parallel 2``:
  ``/health``, ``/props`` (``total_slots``, per-slot ``n_ctx`` = c / parallel), ``/slots``;
  503 "Loading model" while it loads; an input over the batch is a 500 "input (N tokens)
  is too large to process".
- ``python -m llama_cpp.server --embedding true --n_ctx 512``: one request at a time, no
  ``/props``/``/slots``/``/health``, ``/extras/tokenize/count``; its port is closed
  while it loads; an over-long input is cut silently to 512 tokens (HTTP 200).
"""

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from neo_assets_tests.servers import LOOPBACK, free_port

BUILD_HINT = "run .ci/build-llama (builds llama-server, the llama-cpp-python wheel, the GGUF)"
MODEL_DIMENSIONS = 384


def llama_cache() -> Path:
    root = os.environ.get("NEO_LLAMA_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "neo-assets" / "llama"


def gguf_model() -> Path | None:
    path = llama_cache() / "minilm-f16.gguf"
    return path if path.is_file() else None


def llama_server_binary() -> Path | None:
    path = llama_cache() / "llama-server"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def llama_cpp_python_available() -> bool:
    try:
        import llama_cpp.server  # noqa: F401, PLC0415
    except Exception:  # noqa: BLE001 - absent or broken: either way not runnable
        return False
    return True


def _absent(reason: str) -> None:
    """Skip, naming the build script; CI (``NEO_REQUIRE_LLAMA`` set by ``.ci/run``) fails."""
    if os.environ.get("NEO_REQUIRE_LLAMA"):
        pytest.fail(f"{reason} (NEO_REQUIRE_LLAMA is set: these tests may not skip)")
    pytest.skip(reason)


def require_llama_server() -> tuple[Path, Path]:
    binary, model = llama_server_binary(), gguf_model()
    if binary is None or model is None:
        _absent(f"llama-server or minilm-f16.gguf not in {llama_cache()}: {BUILD_HINT}")
    assert binary is not None and model is not None
    return binary, model


def require_llama_cpp_python() -> Path:
    model = gguf_model()
    if model is None or not llama_cpp_python_available():
        _absent(f"llama_cpp.server or minilm-f16.gguf missing: {BUILD_HINT}")
    assert model is not None
    return model


def _get(url: str, timeout: float = 2.0) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return None


class RealServer:
    """One server subprocess on a fixed loopback port: start, wait ready, kill, stop;
    ``supervised`` adds a restart policy (like a container's) for kill tests."""

    ready_path = "/health"
    name = "server"

    def __init__(self, log_dir: Path, port: int | None = None, ready_timeout_s: float = 60.0):
        self.port = port or free_port()
        self.log_path = Path(log_dir) / f"{self.name}-{self.port}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.ready_timeout_s = ready_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.restarts = 0
        self._lock = threading.RLock()
        self._supervise = False
        self._restart_delay_s = 0.2
        self._watcher: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def argv(self) -> list[str]:
        raise NotImplementedError

    # --- lifecycle
    def launch(self) -> "RealServer":
        """Start the process and return at once (a test of loading talks to it now)."""
        with self._lock, open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            self.starts += 1
        return self

    def start(self) -> "RealServer":
        self.launch()
        self.wait_ready()
        return self

    def ready(self) -> bool:
        return _get(self.base_url + self.ready_path) == 200

    def wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            proc = self.proc
            if proc is not None and proc.poll() is not None and not self._supervise:
                raise RuntimeError(f"{self.name} exited {proc.returncode}:\n{self.log_tail()}")
            if self.ready():
                return
            time.sleep(0.05)
        raise TimeoutError(f"{self.name} not ready on {self.base_url}:\n{self.log_tail()}")

    def log_tail(self, limit: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL (an OOM kill); a supervised server is started again."""
        with self._lock:
            proc = self.proc
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)

    def stop(self) -> None:
        with self._lock:
            self._supervise = False
            proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=15)
        if self._watcher is not None:
            self._watcher.join(timeout=15)

    # --- supervision
    def supervised(self, restart_delay_s: float = 0.2) -> "RealServer":
        self._supervise = True
        self._restart_delay_s = restart_delay_s
        self.start()
        self._watcher = threading.Thread(target=self._watch, daemon=True, name="supervisor")
        self._watcher.start()
        return self

    def _watch(self) -> None:
        while True:
            with self._lock:
                proc = self.proc
            if proc is None:
                return
            proc.wait()
            time.sleep(self._restart_delay_s)
            with self._lock:
                if not self._supervise or proc is not self.proc:
                    return
                self.launch()
                self.restarts += 1

    def __enter__(self) -> "RealServer":
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class LlamaServer(RealServer):
    """llama.cpp's ``llama-server`` (``-c`` is split over ``--parallel`` slots)."""

    name = "llama-server"
    ready_path = "/health"

    def __init__(
        self,
        log_dir: Path,
        *,
        slots: int = 2,
        ctx: int = 1024,
        ubatch: int = 512,
        batch: int = 512,
        port: int | None = None,
    ) -> None:
        super().__init__(log_dir, port)
        self.binary, self.model = require_llama_server()
        self.slots, self.ctx, self.ubatch, self.batch = slots, ctx, ubatch, batch

    def argv(self) -> list[str]:
        return [
            str(self.binary),
            "-m",
            str(self.model),
            "--embedding",
            "--pooling",
            "mean",
            "-c",
            str(self.ctx),
            "-ub",
            str(self.ubatch),
            "-b",
            str(self.batch),
            "--parallel",
            str(self.slots),
            "--threads",
            "2",
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
        ]


class LlamaCppPythonServer(RealServer):
    """llama-cpp-python's ``python -m llama_cpp.server`` (one request at a time)."""

    name = "llama_cpp.server"
    ready_path = "/v1/models"

    def __init__(
        self, log_dir: Path, *, n_ctx: int = 512, n_threads: int = 2, port: int | None = None
    ) -> None:
        super().__init__(log_dir, port)
        self.model = require_llama_cpp_python()
        self.n_ctx = n_ctx
        self.n_threads = n_threads

    def argv(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model),
            "--embedding",
            "true",
            "--n_ctx",
            str(self.n_ctx),
            "--n_batch",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
            "--n_threads_batch",
            str(self.n_threads),
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
        ]


@contextmanager
def running(server: RealServer, *, supervise: bool = False) -> Iterator[RealServer]:
    """``server`` started (and supervised), always stopped afterwards."""
    try:
        if supervise:
            server.supervised()
        else:
            server.start()
        yield server
    finally:
        server.stop()
