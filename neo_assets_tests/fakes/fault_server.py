"""A fault-injecting embedding server, run as a real subprocess by the tests.

    python -m neo_assets_tests.fakes.fault_server --port P --state-dir D [--dimensions N]

It speaks three protocols with deterministic vectors (the hashing embedder):

- OpenAI-compatible ``POST /v1/embeddings`` ``{"model", "input"}`` → ``{"data": [...]}``;
- Ollama ``POST /api/embed`` ``{"model", "input", "truncate"}`` → ``{"embeddings": [...]}``;
- Gemini ``POST /v1beta/models/{model}:batchEmbedContents`` → ``{"embeddings": [{"values"}]}``.

Faults, per input by a marker in the text (``marker("kill")`` → ``[[fault:kill]]``,
``marker("hang", 2)`` → ``[[fault:hang=2]]``) or for every request through the control
file's ``mode``:

- ``hang[=s]``: hold the request ``s`` seconds (control ``hang_s`` by default), then answer;
  a client that disconnects meanwhile is counted in ``client_disconnects``;
- ``bad_request``: 400; ``too_large``: llama.cpp's "input is too large" 500;
  ``error500``: a generic 500; ``loading``: llama.cpp's 503 "Loading model" (what it
  answers while its model loads); ``runner_died``: Ollama's 500 "llama runner process
  has terminated: signal: killed" (its runner was OOM-killed; the server lives on);
- ``close``: read the request, then close without answering (the client sees
  "server disconnected"); ``reset``: the same with an RST (connection reset);
- ``kill``: ``os._exit`` on receipt (stats flushed first), like an OOM kill;
- ``wrong_dim`` / ``nan`` / ``inf`` / ``zero``: that row's vector is broken (every row
  when set as ``mode``).

Runtime control is the JSON file ``D/control.json`` (written atomically by the
supervisor, re-read on every request and by a watcher every 20 ms, so ``refuse`` works
while nothing can connect). Keys: ``mode``, ``hang_s``, ``latency_s`` (per request),
``latency_per_input_s``, ``slots`` (concurrent requests computed at once; ``null`` =
unlimited), ``dimensions``, ``refuse`` (stop listening: connections are refused),
``api_key``, ``reverse_order``, ``too_large_over_chars``, ``kill_over_chars``,
``max_batch`` (more inputs in one request → TEI's 413 "batch size N > maximum allowed
batch size M"), ``finish_abandoned`` (a held request runs its full time even after the
client left, as llama.cpp and llama-cpp-python do, keeping its slot busy), ``props``
(answered at ``GET /props``, as llama.cpp does),
``vectors`` (``"hashing"``: the hashing embedder's vectors, meaningful, ~0.3 ms per
input; ``"digest"``: a digest-derived unit vector, meaningless but cheap, so a
benchmark measures the client and not the fake), ``record_bodies`` (append every request
body as received to ``D/bodies.log``), ``version`` (echoed as ``control_version`` once
applied).

Counters live in ``D/stats.json`` (atomically replaced on every change) and at
``GET /__stats``; they survive a restart (a new process loads them and counts on).
A request is counted as received/completed BEFORE its answer is written, so a client
holding an answer always sees it counted; the gauges ``open_requests`` (being handled)
and ``open_connections`` (accepted, not yet closed) drop after the fact, so tests wait
for them (``FaultServerSupervisor.wait_for``).
"""

import argparse
import hashlib
import json
import os
import re
import select
import socket
import socketserver
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np

from neo_assets.embedding.providers.hashing import hash_embed

KILL_EXIT_CODE = 17
CONTROL_FILE = "control.json"
STATS_FILE = "stats.json"
READY_FILE = "ready.json"

FAULTS = (
    "kill",
    "reset",
    "close",
    "hang",
    "too_large",
    "bad_request",
    "loading",
    "runner_died",
    "error500",
    "wrong_dim",
    "nan",
    "inf",
    "zero",
)
ROW_FAULTS = ("wrong_dim", "nan", "inf", "zero")
_MARKER = re.compile(r"\[\[fault:([a-z_0-9]+)(?:=([0-9.]+))?\]\]")
TOO_LARGE_BODY = {
    "error": {
        "code": 500,
        "message": "input is too large to process. increase the physical batch size",
        "type": "server_error",
    }
}
LOADING_BODY = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
RUNNER_DIED_BODY = {"error": "llama runner process has terminated: signal: killed"}
DEFAULT_CONTROL: dict[str, Any] = {
    "mode": "answer",
    "hang_s": 30.0,
    "latency_s": 0.0,
    "latency_per_input_s": 0.0,
    "slots": None,
    "dimensions": None,
    "refuse": False,
    "api_key": None,
    "reverse_order": False,
    "too_large_over_chars": None,
    "kill_over_chars": None,
    "max_batch": None,
    "finish_abandoned": False,
    "props": None,
    "vectors": "hashing",
    # Append every request body, as received, to D/bodies.log (what a provider saw).
    "record_bodies": False,
    "version": 0,
}
BODIES_FILE = "bodies.log"
_COUNTERS = (
    "requests_received",
    "inputs_received",
    "requests_completed",
    "inputs_completed",
    "requests_error_status",
    "requests_closed",
    "client_disconnects",
    "responses_unsent",
    "auth_failures",
    "connections_accepted",
    "kills",
    "starts",
)


def marker(kind: str, seconds: float | None = None) -> str:
    """The text that makes the server apply fault ``kind`` to the request carrying it."""
    if kind not in FAULTS:
        raise ValueError(f"unknown fault {kind!r}")
    return f"[[fault:{kind}]]" if seconds is None else f"[[fault:{kind}={seconds:g}]]"


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class ServerState:
    """Control (re-read when the file changes) and counters (flushed on every change)."""

    def __init__(self, state_dir: Path, port: int, dimensions: int) -> None:
        self.dir = state_dir
        self.port = port
        self.default_dimensions = dimensions
        self.lock = threading.RLock()
        self.slot_cond = threading.Condition()
        self.active = 0
        self.connections: dict[socket.socket, bool] = {}  # socket → busy
        self.resets: set[socket.socket] = set()  # to be closed with RST, without FIN
        self.control: dict[str, Any] = dict(DEFAULT_CONTROL)
        self._control_stamp: tuple[int, int] | None = None
        previous = read_json(state_dir / STATS_FILE) or {}
        self.stats: dict[str, Any] = {name: int(previous.get(name, 0)) for name in _COUNTERS}
        self.stats["marker_hits"] = dict(previous.get("marker_hits", {}))
        self.stats["max_inputs_per_request"] = int(previous.get("max_inputs_per_request", 0))
        self.stats["last_request"] = previous.get("last_request")
        # Gauges describe this incarnation only: a dead process holds no requests.
        self.stats.update(
            open_requests=0,
            open_connections=0,
            pid=os.getpid(),
            port=port,
            listening=False,
            control_version=-1,
        )
        self.stats["starts"] += 1
        self.reload_control()

    # --- control
    def reload_control(self) -> dict[str, Any]:
        path = self.dir / CONTROL_FILE
        try:
            st = path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        with self.lock:
            if stamp != self._control_stamp:
                data = read_json(path) if stamp is not None else {}
                if data is not None:  # a torn read keeps the previous control
                    self.control = {**DEFAULT_CONTROL, **data}
                    self._control_stamp = stamp
            return dict(self.control)

    def dimensions(self, control: dict[str, Any]) -> int:
        return int(control.get("dimensions") or self.default_dimensions)

    # --- counters
    def flush(self) -> None:
        with self.lock:
            write_json_atomic(self.dir / STATS_FILE, self.stats)

    def bump(self, **deltas: int) -> None:
        with self.lock:
            for name, delta in deltas.items():
                self.stats[name] = self.stats.get(name, 0) + delta
            self.flush()

    def set(self, **values: Any) -> None:
        with self.lock:
            self.stats.update(values)
            self.flush()

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return json.loads(json.dumps(self.stats))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    state: ServerState

    def server_bind(self) -> None:
        # Skip HTTPServer's getfqdn(): a reverse lookup is slow where DNS is absent.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def shutdown_request(self, request: Any) -> None:
        with self.state.lock:
            reset = request in self.state.resets
            self.state.resets.discard(request)
        if reset:
            self.close_request(request)  # no SHUT_WR: the peer must see RST, not EOF
        else:
            super().shutdown_request(request)


class FaultHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "neo-fault-server/1"
    # Headers and body in one segment: without it each response waits ~40 ms (Nagle).
    disable_nagle_algorithm = True
    timeout = 30  # an idle keep-alive connection's thread ends eventually
    server: _Server

    # --- plumbing
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        return

    def setup(self) -> None:
        super().setup()
        # Headers and body leave in separate writes; Nagle would hold the tail segment
        # for the client's delayed ACK and cap the fake's capacity, not the client's.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        state = self.server.state
        with state.lock:
            state.connections[self.connection] = False
        state.bump(connections_accepted=1, open_connections=1)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            state = self.server.state
            with state.lock:
                state.connections.pop(self.connection, None)
            state.bump(open_connections=-1)

    def _send_json(self, status: int, body: dict[str, Any]) -> bool:
        payload = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            if self.server.state.control.get("refuse"):
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
            return True
        except OSError:
            self.close_connection = True
            self.server.state.bump(responses_unsent=1)
            return False

    def _client_gone(self, wait_s: float) -> bool:
        """Wait up to ``wait_s``; True as soon as the client closed or reset the connection."""
        sock = self.connection
        end = time.monotonic() + max(0.0, wait_s)
        poller = select.poll()  # not select(): no FD_SETSIZE ceiling under load
        poller.register(sock, select.POLLIN | select.POLLHUP | select.POLLERR)
        while True:
            remaining = end - time.monotonic()
            try:
                events = poller.poll(max(0, int(remaining * 1000)))
            except (OSError, ValueError):
                return True
            if events:
                try:
                    if sock.recv(1, socket.MSG_PEEK) == b"":
                        return True
                except OSError:
                    return True
                # Bytes of a pipelined next request: not a disconnect; don't spin on them.
                time.sleep(min(0.01, max(0.0, remaining)))
            if remaining <= 0:
                return False

    def _hold(self, seconds: float, finish: bool = False) -> bool:
        """Hold the request; True when the client disconnected meanwhile (counted). With
        ``finish`` the full time is held anyway (the work goes on without its client)."""
        if seconds <= 0:
            return False
        started = time.monotonic()
        if self._client_gone(seconds):
            self.server.state.bump(client_disconnects=1)
            if finish:
                time.sleep(max(0.0, seconds - (time.monotonic() - started)))
            return True
        return False

    def _acquire_slot(self, control: dict[str, Any]) -> bool:
        state = self.server.state
        limit = control.get("slots")
        with state.slot_cond:
            while limit is not None and state.active >= int(limit):
                state.slot_cond.wait(0.02)
                if self._client_gone(0):
                    state.bump(client_disconnects=1)
                    return False
                limit = state.reload_control().get("slots")
            state.active += 1
        return True

    def _release_slot(self) -> None:
        state = self.server.state
        with state.slot_cond:
            state.active -= 1
            state.slot_cond.notify_all()

    # --- routes
    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path in ("/health", "/"):
            self._send_json(200, {"status": "ok"})
        elif path == "/__stats":
            self._send_json(200, self.server.state.snapshot())
        elif path == "/props" and self.server.state.reload_control().get("props") is not None:
            # llama.cpp's /props, when a test gives one (``props``: the JSON to answer).
            self._send_json(200, self.server.state.reload_control()["props"])
        else:
            self._send_json(404, {"error": {"code": 404, "message": "not found"}})

    def do_POST(self) -> None:
        state = self.server.state
        with state.lock:
            state.connections[self.connection] = True
        try:
            self._post()
        finally:
            with state.lock:
                if self.connection in state.connections:
                    state.connections[self.connection] = False

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        state = self.server.state
        if state.reload_control().get("record_bodies"):
            with state.lock, open(state.dir / BODIES_FILE, "ab") as log:
                log.write(raw + b"\n")
        try:
            return json.loads(raw or b"null")
        except ValueError:
            return None

    def _post(self) -> None:
        split = urlsplit(self.path)
        path = split.path
        body = self._read_body()
        if path == "/__control":
            self._control(body)
            return
        protocol = (
            "openai"
            if path == "/v1/embeddings"
            else "ollama"
            if path == "/api/embed"
            else "gemini"
            if path.startswith("/v1beta/models/") and path.endswith(":batchEmbedContents")
            else None
        )
        if protocol is None:
            self._send_json(404, {"error": {"code": 404, "message": f"no route {path}"}})
            return
        state = self.server.state
        control = state.reload_control()
        texts, requested_dims, facts = self._parse(protocol, body, split.query)
        if texts is None:
            state.bump(requests_received=1, requests_error_status=1)
            self._send_json(400, {"error": {"code": 400, "message": "malformed request"}})
            return
        faults = self._faults(texts, control)
        with state.lock:
            state.stats["open_requests"] += 1
            state.stats["requests_received"] += 1
            state.stats["inputs_received"] += len(texts)
            state.stats["max_inputs_per_request"] = max(
                state.stats["max_inputs_per_request"], len(texts)
            )
            hits = state.stats["marker_hits"]
            for kind in faults:
                hits[kind] = hits.get(kind, 0) + 1
            state.stats["last_request"] = facts
            state.flush()
        try:
            self._answer(protocol, texts, requested_dims, faults, control, facts)
        finally:
            state.bump(open_requests=-1)

    def _parse(
        self, protocol: str, body: Any, query: str
    ) -> tuple[list[str] | None, int | None, dict[str, Any]]:
        facts: dict[str, Any] = {"protocol": protocol, "path": urlsplit(self.path).path}
        auth = self.headers.get("Authorization")
        goog = self.headers.get("x-goog-api-key")
        query_key = (parse_qs(query).get("key") or [None])[0]
        facts["auth"] = auth
        facts["x_goog_api_key"] = goog
        facts["query_key"] = query_key
        if not isinstance(body, dict):
            return None, None, facts
        facts["keys"] = sorted(body)
        dims: int | None = None
        texts: Any
        if protocol in ("openai", "ollama"):
            texts = body.get("input")
            if isinstance(texts, str):
                texts = [texts]
            facts["model"] = body.get("model")
            for key in ("truncate", "encoding_format", "dimensions", "options"):
                if key in body:
                    facts[key] = body[key]
            if isinstance(body.get("dimensions"), int):
                dims = body["dimensions"]
        else:
            requests = body.get("requests")
            if not isinstance(requests, list):
                return None, None, facts
            texts = []
            models = set()
            for item in requests:
                try:
                    texts.append("".join(p["text"] for p in item["content"]["parts"]))
                except (KeyError, TypeError):
                    return None, None, facts
                models.add(item.get("model"))
                if isinstance(item.get("outputDimensionality"), int):
                    dims = item["outputDimensionality"]
            facts["request_models"] = sorted(str(m) for m in models)
            facts["model"] = urlsplit(self.path).path.split("/models/", 1)[1].split(":", 1)[0]
            facts["outputDimensionality"] = dims
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return None, None, facts
        facts["n_inputs"] = len(texts)
        return texts, dims, facts

    def _faults(self, texts: list[str], control: dict[str, Any]) -> dict[str, float | None]:
        """Fault kind → its argument, from markers, size thresholds and the global mode."""
        faults: dict[str, float | None] = {}
        for text in texts:
            for kind, arg in _MARKER.findall(text):
                if kind in FAULTS:
                    faults.setdefault(kind, float(arg) if arg else None)
        longest = max((len(t) for t in texts), default=0)
        if control.get("kill_over_chars") is not None and longest > control["kill_over_chars"]:
            faults.setdefault("kill", None)
        over = control.get("too_large_over_chars")
        if over is not None and longest > over:
            faults.setdefault("too_large", None)
        mode = control.get("mode") or "answer"
        if mode in FAULTS:
            faults.setdefault(mode, None)
        return faults

    def _authorized(self, protocol: str, control: dict[str, Any], facts: dict[str, Any]) -> bool:
        key = control.get("api_key")
        if not key:
            return True
        if protocol == "gemini":
            return key in (facts.get("x_goog_api_key"), facts.get("query_key"))
        return facts.get("auth") == f"Bearer {key}"

    def _answer(
        self,
        protocol: str,
        texts: list[str],
        requested_dims: int | None,
        faults: dict[str, float | None],
        control: dict[str, Any],
        facts: dict[str, Any],
    ) -> None:
        state = self.server.state
        if "kill" in faults:
            state.bump(kills=1)
            os._exit(KILL_EXIT_CODE)
        if "reset" in faults or "close" in faults:
            state.bump(requests_closed=1)
            self.close_connection = True
            if "reset" in faults:
                # Linger 0 and no FIN first: the final close() sends RST (ECONNRESET).
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                with state.lock:
                    state.resets.add(self.connection)
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        if not self._authorized(protocol, control, facts):
            state.bump(auth_failures=1, requests_error_status=1)
            status = 403 if protocol == "gemini" else 401
            self._send_json(status, {"error": {"code": status, "message": "invalid API key"}})
            return
        if "loading" in faults:
            state.bump(requests_error_status=1)
            self._send_json(503, LOADING_BODY)
            return
        cap = control.get("max_batch")
        if cap is not None and len(texts) > int(cap):
            state.bump(requests_error_status=1)
            message = f"batch size {len(texts)} > maximum allowed batch size {int(cap)}"
            self._send_json(413, {"error": message, "error_type": "Validation"})
            return
        if not self._acquire_slot(control):
            return
        try:
            hang = 0.0
            if "hang" in faults:
                hang = faults["hang"] if faults["hang"] is not None else control.get("hang_s")
            delay = (
                float(control.get("latency_s") or 0.0)
                + float(control.get("latency_per_input_s") or 0.0) * len(texts)
                + float(hang or 0.0)
            )
            if self._hold(delay, bool(control.get("finish_abandoned"))):
                self.close_connection = True
                return
        finally:
            self._release_slot()
        if "too_large" in faults:
            state.bump(requests_error_status=1)
            self._send_json(500, TOO_LARGE_BODY)
            return
        if "bad_request" in faults:
            state.bump(requests_error_status=1)
            self._send_json(
                400,
                {"error": {"code": 400, "message": "invalid input", "type": "invalid_request"}},
            )
            return
        if "runner_died" in faults:
            state.bump(requests_error_status=1)
            self._send_json(500, RUNNER_DIED_BODY)
            return
        if "error500" in faults:
            state.bump(requests_error_status=1)
            self._send_json(
                500, {"error": {"code": 500, "message": "internal error", "type": "server_error"}}
            )
            return
        dims = requested_dims or state.dimensions(control)
        global_mode = control.get("mode")
        vectors = []
        for text in texts:
            row_faults = {k for k, _ in _MARKER.findall(text)} & set(ROW_FAULTS)
            if global_mode in ROW_FAULTS:
                row_faults.add(global_mode)
            vectors.append(_vector(text, dims, row_faults, str(control.get("vectors"))))
        state.bump(requests_completed=1, inputs_completed=len(texts))
        self._send_json(200, _shape(protocol, vectors, facts, bool(control.get("reverse_order"))))

    def _control(self, body: Any) -> None:
        state = self.server.state
        if not isinstance(body, dict):
            self._send_json(400, {"error": {"code": 400, "message": "control must be an object"}})
            return
        current = read_json(state.dir / CONTROL_FILE) or {}
        write_json_atomic(state.dir / CONTROL_FILE, {**current, **body})
        self._send_json(200, state.reload_control())


def digest_embed(text: str, dims: int) -> np.ndarray:
    """A deterministic unit vector from the text's digest: no meaning, ~100x cheaper."""
    raw = hashlib.shake_256(text.encode("utf-8", errors="replace")).digest(dims)
    vec = np.frombuffer(raw, dtype=np.int8).astype(np.float32) + np.float32(0.5)
    return vec / np.float32(np.linalg.norm(vec))


def _vector(text: str, dims: int, row_faults: set[str], kind: str) -> list[float]:
    embed = digest_embed if kind == "digest" else hash_embed
    if "wrong_dim" in row_faults:
        return embed(text, max(1, dims - 1)).tolist()
    if "zero" in row_faults:
        return [0.0] * dims
    values = embed(text, dims).tolist()
    if "nan" in row_faults:
        values[0] = float("nan")
    if "inf" in row_faults:
        values[0] = float("inf")
    return values


def _shape(
    protocol: str, vectors: list[list[float]], facts: dict[str, Any], reverse: bool
) -> dict[str, Any]:
    if protocol == "ollama":
        return {"model": facts.get("model"), "embeddings": vectors}
    if protocol == "gemini":
        return {"embeddings": [{"values": v} for v in vectors]}
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    if reverse:
        data.reverse()
    tokens = sum(len(v) for v in vectors)  # a stand-in: the shape, not a real count
    return {
        "object": "list",
        "data": data,
        "model": facts.get("model"),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


class Listener:
    """The listening socket, which can go away (refused) and come back on the same port."""

    def __init__(self, state: ServerState, host: str) -> None:
        self.state = state
        self.host = host
        self.httpd: _Server | None = None
        self.thread: threading.Thread | None = None

    @property
    def listening(self) -> bool:
        return self.httpd is not None

    def start(self) -> None:
        last_error: OSError | None = None
        for _ in range(100):
            try:
                httpd = _Server((self.host, self.state.port), FaultHandler)
                break
            except OSError as exc:  # the old socket may linger for a moment
                last_error = exc
                time.sleep(0.02)
        else:
            raise RuntimeError(f"cannot bind {self.host}:{self.state.port}") from last_error
        httpd.state = self.state
        self.httpd = httpd
        self.thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def stop(self) -> None:
        if self.httpd is None:
            return
        self.httpd.shutdown()
        self.httpd.server_close()  # connections are now refused
        self.httpd = None
        # Idle keep-alive connections go too, as with a dead server; in-flight requests
        # finish (their answers carry Connection: close).
        with self.state.lock:
            idle = [sock for sock, busy in self.state.connections.items() if not busy]
        for sock in idle:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(state_dir: Path, port: int, dimensions: int, host: str = "127.0.0.1") -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    state = ServerState(state_dir, port, dimensions)
    listener = Listener(state, host)
    control = state.reload_control()
    if not control.get("refuse"):
        listener.start()
    state.set(listening=listener.listening, control_version=int(control.get("version", 0)))
    write_json_atomic(state_dir / READY_FILE, {"pid": os.getpid(), "port": port})
    while True:
        control = state.reload_control()
        if control.get("refuse") and listener.listening:
            listener.stop()
        elif not control.get("refuse") and not listener.listening:
            listener.start()
        version = int(control.get("version", 0))
        if (
            state.stats["control_version"] != version
            or state.stats["listening"] != listener.listening
        ):
            state.set(control_version=version, listening=listener.listening)
        time.sleep(0.02)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--dimensions", type=int, default=64)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    try:
        serve(args.state_dir, args.port, args.dimensions, args.host)
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
