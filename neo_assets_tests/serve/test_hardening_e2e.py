"""What an unauthenticated or malformed request costs the real service on loopback
(issue 36 items 2 and 3): MCP answers nothing before a valid token (401 at the HTTP layer,
so `initialize` and `tools/list` too), a huge header is refused at once, and malformed
input is a 4xx, never a 500."""

import socket
import time
from collections.abc import Iterator
from urllib.parse import urlparse

import httpx
import pytest

from neo_assets.core import codes
from neo_assets_tests.serve.service_harness import Served, ServedKb

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedKb]:
    built = ServedKb.build(tmp_path_factory.mktemp("hardening"))
    yield built
    built.stop_store()


@pytest.fixture(scope="module")
def served(kb: ServedKb) -> Iterator[Served]:
    with kb.serve() as svc:
        yield svc


@pytest.fixture(scope="module")
def token(kb: ServedKb) -> str:
    return kb.issue("acme")["token"]


@pytest.mark.parametrize("authorization", [None, "Bearer nope", "Basic abc"])
def test_mcp_initialize_without_a_valid_token_is_401_at_the_http_layer(
    served: Served, authorization: str | None
) -> None:
    headers = MCP_HEADERS | ({"Authorization": authorization} if authorization else {})
    got = httpx.post(f"{served.url}/mcp", json=INITIALIZE, headers=headers, timeout=10)
    assert got.status_code == 401
    assert got.headers.get("www-authenticate") == "Bearer"
    assert got.json()["error"]["code"].startswith("AUTH_")
    # A GET that would open a server-sent stream is refused the same way, at once.
    started = time.monotonic()
    stream = httpx.get(f"{served.url}/mcp", headers={"Accept": "text/event-stream"}, timeout=10)
    assert stream.status_code == 401 and time.monotonic() - started < 2


def test_mcp_initialize_with_a_token_is_answered(served: Served, token: str) -> None:
    headers = MCP_HEADERS | {"Authorization": f"Bearer {token}"}
    got = httpx.post(f"{served.url}/mcp", json=INITIALIZE, headers=headers, timeout=10)
    assert got.status_code == 200, got.text
    assert got.json()["result"]["serverInfo"]["name"] == "neo-assets"


def test_a_32_mb_header_is_refused_in_under_2_s_and_the_service_goes_on(
    served: Served, token: str
) -> None:
    address = urlparse(served.url)
    started = time.monotonic()
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        sock.sendall(b"GET /v1/repos HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ")
        answer = b""
        try:
            chunk = b"A" * 65536
            for _ in range(512):  # 32 MB, unless the service hangs up first
                sock.sendall(chunk)
        except OSError:
            pass  # refused and closed while sending: what we want
        try:
            answer = sock.recv(4096)
        except OSError:
            answer = b""
    took = time.monotonic() - started
    assert took < 2, took
    assert answer == b"" or answer.startswith(b"HTTP/1.1 4")
    ok = httpx.get(
        f"{served.url}/v1/repos", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    assert ok.status_code == 200


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/search", "[" * 5000 + "]" * 5000),
        ("POST", "/v1/search", '{"query": ' + "[" * 3000 + "]" * 3000 + "}"),
        ("GET", "/v1/chunks/" + "a" * 64 + "/related?limit=%C2%B2", None),
        ("GET", "/v1/chunks/" + "a" * 64 + "/related?limit=99999999999999999999", None),
    ],
)
def test_malformed_input_is_a_4xx_never_a_500(
    served: Served, token: str, method: str, path: str, body: str | None
) -> None:
    got = httpx.request(
        method,
        f"{served.url}{path}",
        content=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=10,
    )
    assert 400 <= got.status_code < 500, got.text
    assert got.json()["error"]["code"] in (
        codes.QUERY_MALFORMED_JSON,
        codes.QUERY_INVALID,
        codes.QUERY_NOT_FOUND,
    )
