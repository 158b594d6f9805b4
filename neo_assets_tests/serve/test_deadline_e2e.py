"""Deadlines that cancel (issue 36 item 3), on the real service on loopback: a request past
NEO_SERVE_REQUEST_TIMEOUT_S is answered 504 at its deadline, its work stops, and nothing
past the deadline answers 200 (HTTP) or a result (MCP).

Two slow parts, both real: the embedding provider (the fault server holding the request:
the provider call is cut, the server sees the client leave) and the store (a real Chroma
server behind a proxy that stalls and counts requests: after the deadline the service
sends the store nothing more). Before the request deadline reached the work in threads, a
stalled store answered 504 (or 200) only when the store came back, and the work went on."""

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from neo_assets.core import codes
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor
from neo_assets_tests.serve.service_harness import Served, ServedKb
from neo_assets_tests.serve.stall_proxy import StallProxy
from neo_assets_tests.servers import chroma_server_or_skip

TIMEOUT_S = 1.5
SLACK_S = 1.0  # two loaded cores
STALL_S = 4.0  # how long the store stays stalled: well past the deadline
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("deadline")
    with (
        FaultServerSupervisor(root / "fault") as fault,
        chroma_server_or_skip(root / "chroma") as chroma,
        StallProxy(("127.0.0.1", chroma.port)) as proxy,
    ):
        kb = ServedKb.build(
            root / "kb",
            NEO_EMBEDDING_PROVIDER="openai_compatible",
            NEO_EMBEDDING_BASE_URL=fault.base_url,
            NEO_EMBEDDING_MODEL="fake-embed",
            NEO_EMBEDDING_DIMENSIONS="64",
            NEO_EMBEDDING_RECOVERY_MAX_WAIT_S="0.2",
            NEO_CHROMA_URL=proxy.url,
        )
        with kb.serve(NEO_SERVE_REQUEST_TIMEOUT_S=str(TIMEOUT_S)) as served:
            yield {"kb": kb, "served": served, "fault": fault, "proxy": proxy}


@pytest.fixture(scope="module")
def token(parts: dict[str, Any]) -> str:
    return parts["kb"].issue("acme")["token"]


def _search(served: Served, token: str, query: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    got = httpx.post(
        f"{served.url}/v1/search",
        json={"query": query, "k": 3},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    return got, time.monotonic() - started


def _mcp_call(served: Served, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    got = httpx.post(
        f"{served.url}/mcp",
        json={
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        },
        headers=MCP_HEADERS | {"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert got.status_code == 200, got.text[:300]
    return got.json()


def test_a_hung_provider_call_is_cut_at_the_deadline(parts: dict[str, Any], token: str) -> None:
    served, fault = parts["served"], parts["fault"]
    assert _search(served, token, "dispatch_request")[0].status_code == 200
    before = fault.stats()
    fault.configure(mode="hang", hang_s=30)
    try:
        got, took = _search(served, token, "dispatch a hung request")
        assert got.status_code == 504, got.text[:300]
        assert got.json()["error"]["code"] == codes.QUERY_TIMEOUT
        assert TIMEOUT_S <= took + 0.05 and took < TIMEOUT_S + SLACK_S, took
        # The provider saw the client leave: the call was closed, not left to run 30 s.
        after = fault.wait_for(
            lambda s: (
                s["client_disconnects"] > before["client_disconnects"] and s["open_requests"] == 0
            ),
            timeout_s=5,
            what="the held provider request closed",
        )
        assert after["requests_received"] == before["requests_received"] + 1

        # MCP: the same deadline, a tool error, never a result.
        started = time.monotonic()
        answer = _mcp_call(served, token, "search_code", {"query": "dispatch hung again"})
        assert time.monotonic() - started < TIMEOUT_S + SLACK_S
        assert answer["result"]["isError"] is True
        assert "QUERY_TIMEOUT" in json.dumps(answer["result"]["content"])
    finally:
        fault.reset()


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/search", {"query": "dispatch a stalled request", "k": 3}),
        ("GET", "/v1/repos", None),
    ],
)
def test_a_stalled_store_is_answered_504_at_the_deadline_and_its_work_stops(
    parts: dict[str, Any], token: str, method: str, path: str, body: Any
) -> None:
    served, proxy = parts["served"], parts["proxy"]
    headers = {"Authorization": f"Bearer {token}"}
    warm = httpx.request(method, f"{served.url}{path}", json=body, headers=headers, timeout=30)
    assert warm.status_code == 200, warm.text[:300]
    time.sleep(1.1)  # past NEO_SERVE_TRUTH_RECHECK_S: the request asks the store again
    proxy.stall()
    releaser = threading.Timer(STALL_S, proxy.release)
    releaser.start()
    try:
        started = time.monotonic()
        got = httpx.request(method, f"{served.url}{path}", json=body, headers=headers, timeout=30)
        took = time.monotonic() - started
        sent_by_the_deadline = proxy.requests
    finally:
        releaser.join()
    assert got.status_code == 504, got.text[:300]
    assert got.json()["error"]["code"] == codes.QUERY_TIMEOUT
    assert took < TIMEOUT_S + SLACK_S, took
    # The store is back: the held call returns, and the work stops at its next step
    # instead of asking the store for more (the rows, the freshness) for nobody.
    time.sleep(2.0)
    assert proxy.requests == sent_by_the_deadline, (sent_by_the_deadline, proxy.requests)
    assert "work stopped past its request's deadline" in served.log()
    again = httpx.request(method, f"{served.url}{path}", json=body, headers=headers, timeout=30)
    assert again.status_code == 200, again.text[:300]


def test_a_stalled_store_never_answers_an_mcp_tool_with_a_result(
    parts: dict[str, Any], token: str
) -> None:
    """The tool's thread cannot be interrupted inside the stalled store call, so the MCP
    request is cut a second past the deadline (504) rather than waiting for the store;
    the thread stops at its next step when the store is back. Never a result."""
    served, proxy = parts["served"], parts["proxy"]
    assert _mcp_call(served, token, "list_repos", {})["result"].get("isError") is not True
    time.sleep(1.1)
    proxy.stall()
    releaser = threading.Timer(STALL_S, proxy.release)
    releaser.start()
    try:
        started = time.monotonic()
        got = httpx.post(
            f"{served.url}/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 8,
                "method": "tools/call",
                "params": {"name": "list_repos", "arguments": {}},
            },
            headers=MCP_HEADERS | {"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        took = time.monotonic() - started
    finally:
        releaser.join()
    assert got.status_code == 504, got.text[:300]
    assert got.json()["error"]["code"] == codes.QUERY_TIMEOUT
    assert took < TIMEOUT_S + 1.0 + SLACK_S, took
    time.sleep(1.0)
    assert "work stopped past its request's deadline" in served.log()
