"""The fault server and its supervisor, exercised over raw HTTP and raw sockets.

The server is what the embedding tests trust to tell them what the client did (a
disconnect, a request never sent), so its own counting is tested here first.
"""

import json
import math
import socket
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from neo_assets.embedding.providers.hashing import hash_embed
from neo_assets_tests.fakes.fault_server import (
    KILL_EXIT_CODE,
    TOO_LARGE_BODY,
    digest_embed,
    marker,
)
from neo_assets_tests.fakes.fixtures import (
    fault_server,  # noqa: F401 - a fixture, used by name
    fault_server_factory,  # noqa: F401 - a fixture, used by name
    fault_server_fixture,
)
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor

DIMS = 16
_shared = fault_server_fixture(scope="module", dimensions=DIMS)


@pytest.fixture
def srv(_shared: FaultServerSupervisor) -> Iterator[FaultServerSupervisor]:
    _shared.reset()
    _shared.wait_idle()
    yield _shared


def post(srv: FaultServerSupervisor, path: str, body: dict[str, Any], **kw: Any) -> httpx.Response:
    with httpx.Client(base_url=srv.base_url, timeout=10) as client:
        return client.post(path, json=body, **kw)


def raw_request(srv: FaultServerSupervisor, texts: list[str]) -> socket.socket:
    """Send one OpenAI request on a raw socket and return the socket, unread."""
    body = json.dumps({"model": "m", "input": texts}).encode()
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    sock.sendall(
        b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    return sock


def delta(before: dict[str, Any], after: dict[str, Any], key: str) -> int:
    return int(after[key]) - int(before[key])


# --- protocols
def test_openai_shape_and_counters(srv: FaultServerSupervisor) -> None:
    before = srv.stats()
    response = post(srv, "/v1/embeddings", {"model": "m", "input": ["a", "b", "c"]})
    assert response.status_code == 200
    body = response.json()
    assert [item["index"] for item in body["data"]] == [0, 1, 2]
    assert body["data"][1]["embedding"] == pytest.approx(hash_embed("b", DIMS).tolist())
    after = srv.stats()
    assert delta(before, after, "requests_received") == 1
    assert delta(before, after, "inputs_received") == 3
    assert delta(before, after, "requests_completed") == 1
    assert delta(before, after, "inputs_completed") == 3
    assert after["max_inputs_per_request"] >= 3


def test_openai_single_string_input_and_requested_dimensions(srv: FaultServerSupervisor) -> None:
    response = post(srv, "/v1/embeddings", {"model": "m", "input": "solo", "dimensions": 8})
    assert len(response.json()["data"][0]["embedding"]) == 8


def test_digest_vectors_are_deterministic_unit_vectors(srv: FaultServerSupervisor) -> None:
    srv.configure(vectors="digest")
    texts = ["a", "b", "a"]
    rows = [
        item["embedding"]
        for item in post(srv, "/v1/embeddings", {"model": "m", "input": texts}).json()["data"]
    ]
    assert rows[0] == rows[2] and rows[0] != rows[1]
    assert rows[0] == pytest.approx(digest_embed("a", DIMS).tolist())
    assert sum(v * v for v in rows[1]) == pytest.approx(1.0, rel=1e-5)


def test_ollama_shape(srv: FaultServerSupervisor) -> None:
    response = post(srv, "/api/embed", {"model": "m", "input": ["a", "b"], "truncate": False})
    assert response.status_code == 200
    embeddings = response.json()["embeddings"]
    assert len(embeddings) == 2 and len(embeddings[0]) == DIMS
    assert srv.stats()["last_request"]["truncate"] is False


def test_gemini_shape_honours_output_dimensionality(srv: FaultServerSupervisor) -> None:
    body = {
        "requests": [
            {"model": "models/g", "content": {"parts": [{"text": t}]}, "outputDimensionality": 12}
            for t in ("a", "b")
        ]
    }
    response = post(srv, "/v1beta/models/g:batchEmbedContents", body)
    assert response.status_code == 200
    values = [e["values"] for e in response.json()["embeddings"]]
    assert len(values) == 2 and len(values[0]) == 12
    assert values[0] == pytest.approx(hash_embed("a", 12).tolist())


def test_malformed_request_is_a_400(srv: FaultServerSupervisor) -> None:
    assert post(srv, "/v1/embeddings", {"model": "m"}).status_code == 400
    assert post(srv, "/nowhere", {"input": ["a"]}).status_code == 404


def test_health_and_stats_endpoints(srv: FaultServerSupervisor) -> None:
    with httpx.Client(base_url=srv.base_url) as client:
        assert client.get("/health").json() == {"status": "ok"}
        assert client.get("/__stats").json()["pid"] == srv.pid


# --- per-input faults
def test_bad_request_and_too_large(srv: FaultServerSupervisor) -> None:
    bad = post(srv, "/v1/embeddings", {"model": "m", "input": ["ok", marker("bad_request")]})
    assert bad.status_code == 400
    large = post(srv, "/v1/embeddings", {"model": "m", "input": [marker("too_large")]})
    assert large.status_code == 500
    assert large.json() == TOO_LARGE_BODY


def test_row_faults_hit_only_the_marked_row(srv: FaultServerSupervisor) -> None:
    texts = ["fine", marker("nan"), marker("zero"), marker("wrong_dim"), marker("inf")]
    # The server writes NaN/Infinity literals, as Python's json does; json.loads reads them.
    rows = [
        item["embedding"]
        for item in post(srv, "/v1/embeddings", {"model": "m", "input": texts}).json()["data"]
    ]
    assert all(math.isfinite(v) for v in rows[0]) and len(rows[0]) == DIMS
    assert math.isnan(rows[1][0])
    assert rows[2] == [0.0] * DIMS
    assert len(rows[3]) == DIMS - 1
    assert math.isinf(rows[4][0])


def test_close_sends_eof_without_an_answer(srv: FaultServerSupervisor) -> None:
    before = srv.stats()
    sock = raw_request(srv, [marker("close")])
    try:
        assert sock.recv(1024) == b""
    finally:
        sock.close()
    after = srv.wait_idle()
    assert delta(before, after, "requests_closed") == 1
    assert delta(before, after, "requests_completed") == 0


def test_reset_sends_rst(srv: FaultServerSupervisor) -> None:
    sock = raw_request(srv, [marker("reset")])
    try:
        with pytest.raises(ConnectionResetError):
            sock.recv(1024)
    finally:
        sock.close()


def test_hang_answers_after_the_hold(srv: FaultServerSupervisor) -> None:
    before = srv.stats()
    response = post(srv, "/v1/embeddings", {"model": "m", "input": [marker("hang", 0.2)]})
    assert response.status_code == 200
    after = srv.stats()
    assert delta(before, after, "requests_completed") == 1
    assert delta(before, after, "client_disconnects") == 0


def test_a_client_leaving_a_held_request_is_counted(srv: FaultServerSupervisor) -> None:
    before = srv.stats()
    sock = raw_request(srv, [marker("hang", 30)])
    srv.wait_for(lambda s: s["open_requests"] == 1, what="request held")
    sock.close()
    after = srv.wait_for(lambda s: s["open_requests"] == 0, what="hold released")
    assert delta(before, after, "client_disconnects") == 1
    assert delta(before, after, "requests_completed") == 0


def test_latency_is_a_hold_too(srv: FaultServerSupervisor) -> None:
    srv.configure(latency_s=30)
    before = srv.stats()
    sock = raw_request(srv, ["plain"])
    srv.wait_for(lambda s: s["open_requests"] == 1, what="request held")
    sock.close()
    after = srv.wait_for(lambda s: s["open_requests"] == 0, what="hold released")
    assert delta(before, after, "client_disconnects") == 1


def test_slots_queue_requests(srv: FaultServerSupervisor) -> None:
    srv.configure(slots=1)
    holder = raw_request(srv, [marker("hang", 30)])
    try:
        srv.wait_for(lambda s: s["open_requests"] == 1, what="slot taken")
        # The only slot is held for 30 s: a second request cannot be answered meanwhile.
        with pytest.raises(httpx.ReadTimeout):
            with httpx.Client(base_url=srv.base_url, timeout=0.5) as client:
                client.post("/v1/embeddings", json={"model": "m", "input": ["queued"]})
    finally:
        holder.close()
    srv.wait_idle()


def test_size_thresholds(srv: FaultServerSupervisor) -> None:
    srv.configure(too_large_over_chars=10)
    assert post(srv, "/v1/embeddings", {"model": "m", "input": ["short"]}).status_code == 200
    big = post(srv, "/v1/embeddings", {"model": "m", "input": ["x" * 11]})
    assert big.status_code == 500 and "too large" in big.text


def test_global_mode_applies_to_every_request(srv: FaultServerSupervisor) -> None:
    srv.configure(mode="bad_request")
    assert post(srv, "/v1/embeddings", {"model": "m", "input": ["a"]}).status_code == 400
    assert post(srv, "/api/embed", {"model": "m", "input": ["a"]}).status_code == 400
    srv.reset()
    assert post(srv, "/v1/embeddings", {"model": "m", "input": ["a"]}).status_code == 200


def test_control_endpoint_merges(srv: FaultServerSupervisor) -> None:
    response = post(srv, "/__control", {"mode": "error500"})
    assert response.json()["mode"] == "error500"
    assert post(srv, "/v1/embeddings", {"model": "m", "input": ["a"]}).status_code == 500
    assert srv.control()["mode"] == "error500"


def test_api_key_checks(srv: FaultServerSupervisor) -> None:
    srv.configure(api_key="k")
    assert post(srv, "/v1/embeddings", {"model": "m", "input": ["a"]}).status_code == 401
    ok = post(
        srv, "/v1/embeddings", {"model": "m", "input": ["a"]}, headers={"Authorization": "Bearer k"}
    )
    assert ok.status_code == 200
    body = {"requests": [{"model": "models/g", "content": {"parts": [{"text": "a"}]}}]}
    path = "/v1beta/models/g:batchEmbedContents"
    assert post(srv, path, body).status_code == 403
    assert post(srv, path, body, headers={"x-goog-api-key": "k"}).status_code == 200
    assert post(srv, path, body, params={"key": "k"}).status_code == 200


def test_marker_rejects_unknown_faults() -> None:
    assert marker("hang", 1.5) == "[[fault:hang=1.5]]"
    with pytest.raises(ValueError):
        marker("explode")


# --- refusing, dying, restarting
def test_refuse_stops_listening_and_resume_restores(srv: FaultServerSupervisor) -> None:
    with httpx.Client(base_url=srv.base_url) as client:
        client.post("/v1/embeddings", json={"model": "m", "input": ["a"]})  # a keep-alive conn
        srv.refuse()
        # An idle keep-alive connection goes with the listener, as with a dead server.
        srv.wait_for(lambda s: s["open_connections"] == 0, what="idle connections closed")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
    assert srv.stats()["listening"] is False
    srv.resume()
    assert post(srv, "/v1/embeddings", {"model": "m", "input": ["a"]}).status_code == 200


def test_kill_marker_kills_and_counters_survive_the_restart(srv: FaultServerSupervisor) -> None:
    before = srv.stats()
    restarts, pid = srv.restarts, srv.pid
    with pytest.raises(httpx.RemoteProtocolError):
        post(srv, "/v1/embeddings", {"model": "m", "input": ["a", marker("kill")]})
    srv.wait_for_restarts(restarts + 1)
    after = srv.stats()
    assert srv.pid != pid and after["pid"] == srv.pid
    assert srv.exit_codes[-1] == KILL_EXIT_CODE
    assert delta(before, after, "kills") == 1
    assert delta(before, after, "starts") == 1
    assert delta(before, after, "requests_received") == 1  # counted before it died
    assert after["open_requests"] == 0  # a dead process holds nothing
    assert post(srv, "/v1/embeddings", {"model": "m", "input": ["a"]}).status_code == 200


def test_modes_survive_a_restart(srv: FaultServerSupervisor) -> None:
    srv.configure(mode="bad_request")
    restarts = srv.restarts
    srv.kill()  # SIGKILL from outside, like an OOM killer
    srv.wait_for_restarts(restarts + 1)
    assert srv.exit_codes[-1] == -9
    assert post(srv, "/v1/embeddings", {"model": "m", "input": ["a"]}).status_code == 400


def test_size_triggered_kill(srv: FaultServerSupervisor) -> None:
    srv.configure(kill_over_chars=100)
    restarts = srv.restarts
    assert post(srv, "/v1/embeddings", {"model": "m", "input": ["small"]}).status_code == 200
    with pytest.raises(httpx.RemoteProtocolError):
        post(srv, "/v1/embeddings", {"model": "m", "input": ["y" * 101]})
    srv.wait_for_restarts(restarts + 1)


def test_no_restart_policy_leaves_it_dead(
    fault_server_factory: Callable[..., FaultServerSupervisor],  # noqa: F811
) -> None:
    server = fault_server_factory(restart=False, dimensions=DIMS)
    with pytest.raises(httpx.RemoteProtocolError):
        post(server, "/v1/embeddings", {"model": "m", "input": [marker("kill")]})
    server.wait_down()
    assert server.pid is None and server.restarts == 0
    with pytest.raises(httpx.ConnectError):
        post(server, "/v1/embeddings", {"model": "m", "input": ["a"]})


def test_function_scoped_fixture_starts_fresh(
    fault_server: FaultServerSupervisor,  # noqa: F811
) -> None:
    stats = fault_server.stats()
    assert stats["starts"] == 1 and stats["requests_received"] == 0
    assert post(fault_server, "/v1/embeddings", {"model": "m", "input": ["a"]}).status_code == 200
