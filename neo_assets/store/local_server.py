"""The embedded default's one Chroma for every process: a local Chroma server over
``$NEO_HOME/chroma``, started on first use and supervised under ``$NEO_HOME/chroma-server``
(``PersistentClient`` is meant for one process; a reader misses what another writes).
Design: docs/design/store.md#local-chroma-server"""

import argparse
import contextlib
import ctypes
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from neo_assets.store.private_files import private_dir

# How long a client waits for a server to answer its first heartbeat (far above Chroma's
# own start, which a loaded machine or a large directory stretches).
START_TIMEOUT_S = 60.0
POLL_S = 0.05
# How often the supervisor looks at its clients and its child.
WATCH_S = 1.0
# A child that dies this many times within RESTART_WINDOW_S is not started again.
MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0
PR_SET_PDEATHSIG = 1


class LocalServerError(RuntimeError):
    """The local Chroma server could not be started or reached; the message names the
    directory, the log and the fix."""


@dataclass(frozen=True)
class ServerPaths:
    """Where one data directory's server keeps its state."""

    chroma_dir: Path
    state_dir: Path

    @classmethod
    def under(cls, home_dir: Path, chroma_dir: Path) -> "ServerPaths":
        return cls(chroma_dir, home_dir / "chroma-server")

    @property
    def start_lock(self) -> Path:
        return self.state_dir / "start.lock"

    @property
    def running_lock(self) -> Path:
        return self.state_dir / "running.lock"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "server.json"

    @property
    def clients_dir(self) -> Path:
        return self.state_dir / "clients"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "server.log"

    def make(self) -> None:
        for d in (self.state_dir.parent, self.state_dir, self.clients_dir, self.chroma_dir):
            private_dir(d)


# ----------------------------------------------------------------------------- processes
def process_started(pid: int) -> str | None:
    """The start time of ``pid`` (field 22 of /proc/PID/stat), None when it is not alive.
    Paired with the pid it names one process even after the pid is reused."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone, or not ours to read
        return None
    # The command name (field 2) is in parentheses and may hold spaces.
    fields = raw.rsplit(")", 1)[-1].split()
    if fields and fields[0] == "Z":  # a zombie has ended
        return None
    return fields[19] if len(fields) > 19 else None


def live_clients(clients_dir: Path) -> list[str]:
    """Registered client processes (``<pid>-<start time>``) still alive; the files of ended
    ones are removed."""
    alive = []
    for entry in clients_dir.glob("*-*"):
        pid_text, _, started = entry.name.partition("-")
        if pid_text.isdigit() and process_started(int(pid_text)) == started:
            alive.append(entry.name)
        else:
            entry.unlink(missing_ok=True)
    return alive


def register_client(paths: ServerPaths) -> None:
    started = process_started(os.getpid())
    if started is not None:
        (paths.clients_dir / f"{os.getpid()}-{started}").touch()


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_state(paths: ServerPaths) -> dict[str, Any] | None:
    """The running server's record, None when there is none or it cannot be read."""
    try:
        doc = json.loads(paths.state_file.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("port"), int):
        return None
    return doc


def heartbeat(url: str, timeout_s: float = 1.0) -> bool:
    try:
        return httpx.get(f"{url}/api/v2/heartbeat", timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


def supervisor_alive(state: dict[str, Any]) -> bool:
    pid, started = state.get("pid"), state.get("pidStarted")
    return isinstance(pid, int) and process_started(pid) == started


# ----------------------------------------------------------------------------- clients
_embedded_holds: dict[Path, tuple[IO[str], int]] = {}


def hold_embedded(paths: ServerPaths) -> Callable[[], None]:
    """Mark the directory as opened embedded by this process (a shared lock, counted per
    open); refused while a local server serves it. Returns the release of this hold."""
    key = paths.chroma_dir
    if key in _embedded_holds:
        fh, count = _embedded_holds[key]
        _embedded_holds[key] = (fh, count + 1)
    else:
        paths.make()
        fh = open(paths.running_lock, "a+")  # noqa: SIM115 - held until the last release
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise LocalServerError(
                f"the Chroma directory {paths.chroma_dir} is served by a local Chroma server "
                f"(state in {paths.state_dir}); opening it embedded beside the server would "
                "corrupt it. Unset NEO_CHROMA_LOCAL (use the server), or stop the processes "
                "using it first"
            ) from None
        _embedded_holds[key] = (fh, 1)
    released = False

    def release() -> None:
        nonlocal released
        if released or key not in _embedded_holds:
            return
        released = True
        fh, count = _embedded_holds[key]
        if count > 1:
            _embedded_holds[key] = (fh, count - 1)
        else:
            del _embedded_holds[key]
            fh.close()

    return release


def ensure_local_server(paths: ServerPaths, *, idle_s: float) -> str:
    """The URL of the local server over ``paths.chroma_dir``, started if none runs; the
    calling process is registered as its client."""
    paths.make()
    with locked(paths.start_lock):
        register_client(paths)
        state = read_state(paths)
        if state is not None and supervisor_alive(state):
            url = str(state["url"])
            if _wait_heartbeat(url, 10.0, state):
                return url
            raise LocalServerError(
                f"the local Chroma server over {paths.chroma_dir} (pid {state['pid']}, "
                f"{url}) does not answer; its log is {paths.log_file}. Stop it "
                f"(kill {state['pid']}) and run the command again"
            )
        paths.state_file.unlink(missing_ok=True)
        return _start(paths, idle_s)


def _wait_heartbeat(url: str, timeout_s: float, state: dict[str, Any] | None) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if heartbeat(url):
            return True
        if state is not None and not supervisor_alive(state):
            return False
        time.sleep(POLL_S * 4)
    return False


def _start(paths: ServerPaths, idle_s: float) -> str:
    args = ("--chroma-dir", paths.chroma_dir, "--state-dir", paths.state_dir, "--idle-s", idle_s)
    cmd = [sys.executable, "-m", "neo_assets.store.local_server", *map(str, args)]
    with open(paths.log_file, "a") as log:
        proc = subprocess.Popen(  # noqa: S603 - our own module
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # a Ctrl-C of the client's terminal is not its end
            close_fds=True,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        state = read_state(paths)
        if state is not None and state.get("pid") == proc.pid and heartbeat(str(state["url"])):
            return str(state["url"])
        code = proc.poll()
        if code is not None:
            raise LocalServerError(_start_failure(paths, code))
        time.sleep(POLL_S)
    proc.terminate()
    raise LocalServerError(
        f"the local Chroma server over {paths.chroma_dir} did not answer within "
        f"{START_TIMEOUT_S:.0f} s; its log is {paths.log_file}"
    )


def _start_failure(paths: ServerPaths, code: int) -> str:
    try:
        tail = paths.log_file.read_text(errors="replace").strip().splitlines()[-1:]
    except OSError:
        tail = []
    why = f": {tail[0][:300]}" if tail else ""
    return (
        f"the local Chroma server over {paths.chroma_dir} exited at start (code {code}){why}. "
        f"Its log is {paths.log_file}; or set NEO_CHROMA_URL to a running Chroma server"
    )


def stop_local_server(paths: ServerPaths, timeout_s: float = 20.0) -> bool:
    """Stop the directory's server (tests, operators); True when one was running."""
    state = read_state(paths)
    if state is None or not supervisor_alive(state):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(int(state["pid"]), signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and supervisor_alive(state):
        time.sleep(POLL_S)
    return True


# ----------------------------------------------------------------------------- supervisor
def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    os.umask(0o077)  # Chroma's files (every chunk's text): the owner's only
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _chroma_command(chroma_dir: Path, port: int) -> list[str]:
    # The server Chroma's own CLI runs (`chroma run`), from this interpreter's package.
    code = (
        "import sys, chromadb_rust_bindings as b; "
        "b.cli(['chroma', 'run', '--path', sys.argv[1], '--host', '127.0.0.1', "
        "'--port', sys.argv[2]])"
    )
    return [sys.executable, "-c", code, str(chroma_dir), str(port)]


class Supervisor:
    def __init__(self, paths: ServerPaths, idle_s: float, guard_fd: int) -> None:
        self.paths = paths
        self.idle_s = idle_s
        # The child holds the directory's guard too, so it stays taken until the child is
        # gone, not only the supervisor.
        self.guard_fd = guard_fd
        self.child: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.stopping = False
        self.deaths: list[float] = []

    def spawn(self) -> bool:
        """Start the child on a free port and wait for its heartbeat; False if it died."""
        self.port = free_port()
        self.child = subprocess.Popen(  # noqa: S603
            _chroma_command(self.paths.chroma_dir, self.port),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # Chroma's banner; its errors go to stderr (the log)
            pass_fds=(self.guard_fd,),
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - single-threaded here
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.child.poll() is not None:
                return False
            if heartbeat(self.url):
                return True
            time.sleep(POLL_S)
        self.child.kill()
        return False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def write_state(self) -> None:
        doc = {
            "pid": os.getpid(),
            "pidStarted": process_started(os.getpid()),
            "childPid": self.child.pid if self.child else None,
            "port": self.port,
            "url": self.url,
            "path": str(self.paths.chroma_dir),
            "startedAt": time.time(),
        }
        tmp = self.paths.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        os.chmod(tmp, 0o600)
        tmp.replace(self.paths.state_file)

    def start_child(self) -> bool:
        for _ in range(3):  # a port taken between the pick and the bind: another port
            if self.spawn():
                self.write_state()
                return True
        return False

    def stop_child(self) -> None:
        if self.child is not None and self.child.poll() is None:
            self.child.terminate()
            try:
                self.child.wait(10)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait()

    def run(self) -> int:
        if not self.start_child():
            print("neo-assets: chroma did not start; see the lines above", file=sys.stderr)
            return 1
        last_client_at = time.monotonic()
        while not self.stopping:
            time.sleep(WATCH_S)
            if not self.paths.chroma_dir.is_dir():  # its directory was removed: nothing to serve
                break
            if live_clients(self.paths.clients_dir):
                last_client_at = time.monotonic()
            elif time.monotonic() - last_client_at >= self.idle_s and self._retire_if_still_idle():
                return 0
            if self.child is not None and self.child.poll() is not None and not self.stopping:
                now = time.monotonic()
                self.deaths = [t for t in self.deaths if now - t < RESTART_WINDOW_S] + [now]
                print(f"neo-assets: chroma exited ({self.child.returncode})", file=sys.stderr)
                if len(self.deaths) > MAX_RESTARTS or not self.start_child():
                    self.paths.state_file.unlink(missing_ok=True)
                    return 1
        self.paths.state_file.unlink(missing_ok=True)
        self.stop_child()
        return 0

    def _retire_if_still_idle(self) -> bool:
        """Under the start lock (so no client registers meanwhile): still no client,
        then remove the record and stop."""
        with open(self.paths.start_lock, "a+") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # a client is starting or registering: look again later
            try:
                if live_clients(self.paths.clients_dir):
                    return False
                self.paths.state_file.unlink(missing_ok=True)
                self.stop_child()
                return True
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chroma-dir", required=True, type=Path)
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--idle-s", required=True, type=float)
    args = parser.parse_args(argv)
    paths = ServerPaths(args.chroma_dir, args.state_dir)
    paths.make()
    guard = open(paths.running_lock, "a+")  # noqa: SIM115 - held for the supervisor's life
    try:
        fcntl.flock(guard, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(
            f"neo-assets: {paths.chroma_dir} is open in another process (an embedded client "
            "or another server); not starting a server over it",
            file=sys.stderr,
        )
        return 1
    supervisor = Supervisor(paths, args.idle_s, guard.fileno())

    def stop(_signum: int, _frame: object) -> None:
        supervisor.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        return supervisor.run()
    finally:
        supervisor.stop_child()


if __name__ == "__main__":
    sys.exit(main())
