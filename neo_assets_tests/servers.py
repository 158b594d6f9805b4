"""Real servers for tests, on 127.0.0.1 only: a Chroma server and a Postgres cluster.

    with ChromaServer(tmp_path / "chroma") as chroma:      # `chroma run` from the venv
        os.environ["NEO_CHROMA_URL"] = chroma.url
        chroma.kill(); chroma.start()                       # a crash and a restart

    with PostgresServer() as pg:                            # initdb + pg_ctl in a tmp dir
        url = pg.create_database()                          # a fresh database per test

Both wait until the server answers before returning, and always stop it (and remove a
Postgres cluster's files) on exit. ``chroma_server_or_skip`` / ``postgres_or_skip`` skip
the test, with the reason, only when the executables cannot be found.
"""

import glob
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""


# ---------------------------------------------------------------------------- Chroma
def chroma_executable() -> Path | None:
    """The ``chroma`` CLI installed with the chromadb package in this interpreter's venv."""
    beside = Path(sys.executable).parent / "chroma"
    if beside.exists():
        return beside
    found = shutil.which("chroma")
    return Path(found) if found else None


class ChromaServer:
    """``chroma run --path DIR --port P --host 127.0.0.1`` as a child process."""

    def __init__(self, path: Path, port: int | None = None, startup_timeout_s: float = 60.0):
        exe = chroma_executable()
        if exe is None:
            raise FileNotFoundError("the `chroma` executable of the chromadb package")
        self.exe = exe
        self.path = Path(path)
        self.port = port or free_port()
        self.startup_timeout_s = startup_timeout_s
        self.log_path = self.path.parent / f"chroma-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> "ChromaServer":
        if self.proc is not None and self.proc.poll() is None:
            return self
        self.path.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "NO_COLOR": "1"}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    str(self.exe),
                    "run",
                    "--path",
                    str(self.path),
                    "--port",
                    str(self.port),
                    "--host",
                    LOOPBACK,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        self.starts += 1
        self._wait_ready()
        return self

    def alive(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=2) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"chroma exited with {self.proc.returncode}:\n{_tail(self.log_path)}"
                )
            if self.alive():
                return
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"chroma did not answer on {self.url}:\n{_tail(self.log_path)}")

    def kill(self) -> None:
        """SIGKILL: the server dies mid-request, as in a crash."""
        self._signal(signal.SIGKILL)

    def stop(self) -> None:
        self._signal(signal.SIGTERM)

    def _signal(self, sig: int) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)

    def __enter__(self) -> "ChromaServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@contextmanager
def chroma_server_or_skip(path: Path) -> Iterator[ChromaServer]:
    if chroma_executable() is None:
        pytest.skip("no `chroma` executable beside this Python or on PATH (chromadb package)")
    with ChromaServer(path) as server:
        yield server


# ---------------------------------------------------------------------------- Postgres
def postgres_bin_dir() -> Path | None:
    """Where initdb and pg_ctl live: PATH first, then Debian's /usr/lib/postgresql/*/bin."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(os.path.realpath(on_path)).parent
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0,
        reverse=True,
    )
    for cand in candidates:
        if (Path(cand) / "initdb").exists() and (Path(cand) / "pg_ctl").exists():
            return Path(cand)
    return None


class PostgresServer:
    """A throwaway cluster: ``initdb`` in a tmp dir, ``pg_ctl start`` on 127.0.0.1.

    Postgres refuses to run as root; as root the server runs as the ``postgres`` system
    user (from the Debian package) in a directory it owns. Durability is off (fsync,
    synchronous_commit): a test cluster trades it for speed.
    """

    USER = "neo"
    _names = itertools.count(1)

    def __init__(self, port: int | None = None, startup_timeout_s: float = 60.0) -> None:
        bin_dir = postgres_bin_dir()
        if bin_dir is None:
            raise FileNotFoundError("initdb / pg_ctl (the postgresql server package)")
        self.bin_dir = bin_dir
        self.port = port or free_port()
        self.startup_timeout_s = startup_timeout_s
        self.root: Path | None = None
        self.running = False

    # --- running commands as the cluster's owner
    def _as_owner(self, argv: list[str]) -> list[str]:
        if os.geteuid() != 0:
            return argv
        runuser = shutil.which("runuser")
        if runuser is None:
            raise FileNotFoundError("runuser (to run Postgres as the postgres user)")
        return [runuser, "-u", "postgres", "--", *argv]

    def _run(self, argv: list[str], *, owner: bool = True, timeout: float = 120) -> str:
        cmd = self._as_owner(argv) if owner else argv
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
            )
        return done.stdout

    @property
    def data_dir(self) -> Path:
        assert self.root is not None
        return self.root / "data"

    @property
    def log_path(self) -> Path:
        assert self.root is not None
        return self.root / "postgres.log"

    def start(self) -> "PostgresServer":
        if self.running:
            return self
        # Not under pytest's tmp dir: as root that is private to root, and the server
        # runs as postgres.
        self.root = Path(tempfile.mkdtemp(prefix="neo-pg-"))
        if os.geteuid() == 0:
            import pwd

            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        try:
            self._run(
                [
                    str(self.bin_dir / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "-U",
                    self.USER,
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--no-locale",
                    "--no-sync",
                ]
            )
            options = (
                f"-h {LOOPBACK} -p {self.port} -k {self.root} -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
            )
            self._run(
                [
                    str(self.bin_dir / "pg_ctl"),
                    "-D",
                    str(self.data_dir),
                    "-l",
                    str(self.log_path),
                    "-w",
                    "-t",
                    str(int(self.startup_timeout_s)),
                    "-o",
                    options,
                    "start",
                ]
            )
            self.running = True
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        isready = self.bin_dir / "pg_isready"
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            done = subprocess.run(
                [
                    str(isready),
                    "-h",
                    LOOPBACK,
                    "-p",
                    str(self.port),
                    "-U",
                    self.USER,
                    "-d",
                    "postgres",
                ],
                capture_output=True,
            )
            if done.returncode == 0:
                return
            time.sleep(0.1)
        raise TimeoutError(f"postgres did not answer on port {self.port}:\n{self.log_tail()}")

    def log_tail(self) -> str:
        return _tail(self.log_path) if self.root else ""

    def stop(self) -> None:
        if self.root is None:
            return
        if self.running:
            try:
                self._run(
                    [
                        str(self.bin_dir / "pg_ctl"),
                        "-D",
                        str(self.data_dir),
                        "-m",
                        "immediate",
                        "-w",
                        "stop",
                    ],
                    timeout=60,
                )
            finally:
                self.running = False
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    # --- databases
    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.USER}@{LOOPBACK}:{self.port}/{database}"

    def create_database(self, name: str | None = None) -> str:
        """A new empty database; its SQLAlchemy URL."""
        name = name or f"neo_{os.getpid()}_{next(self._names)}"
        self._run(
            [
                str(self.bin_dir / "createdb"),
                "-h",
                LOOPBACK,
                "-p",
                str(self.port),
                "-U",
                self.USER,
                name,
            ],
            owner=False,
        )
        return self.url(name)

    def dagster_env(self, database: str) -> dict[str, str]:
        """The DAGSTER_PG_* variables deploy/dagster.yaml reads."""
        return {
            "DAGSTER_PG_HOST": LOOPBACK,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_USERNAME": self.USER,
            "DAGSTER_PG_PASSWORD": "",
            "DAGSTER_PG_DB": database,
        }

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@contextmanager
def postgres_or_skip() -> Iterator[PostgresServer]:
    if postgres_bin_dir() is None:
        pytest.skip(
            "no initdb/pg_ctl on PATH or under /usr/lib/postgresql/*/bin "
            "(install the postgresql package; .ci/run does)"
        )
    with PostgresServer() as server:
        yield server
