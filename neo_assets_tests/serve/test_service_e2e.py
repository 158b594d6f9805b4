"""The query service end to end: a real uvicorn server (``neo-assets serve`` in a
subprocess on loopback) over a real knowledge base of two tenants, real clients (httpx
for HTTP, the mcp SDK's streamable HTTP client for MCP), real tokens issued and revoked
through the CLI."""

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from neo_assets_tests.serve.service_harness import ROOT, Served, ServedKb

FOREIGN_MARK = "globex_vault_secret"
CODE_TOOLS = {"find_symbol", "find_references", "grep", "read_file", "list_files"}


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> ServedKb:
    return ServedKb.build(tmp_path_factory.mktemp("served-kb"))


@pytest.fixture(scope="module")
def served(kb: ServedKb) -> Iterator[Served]:
    with kb.serve(NEO_SERVE_PER_TOKEN_CONCURRENCY="8") as svc:
        yield svc


@pytest.fixture(scope="module")
def tokens(kb: ServedKb) -> dict[str, dict[str, Any]]:
    return {
        "acme": kb.issue("acme", name="acme agent"),
        "widgets": kb.issue("acme", "widgets"),
        "globex": kb.issue("globex"),
    }


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def search(served: Served, token: str, **body: Any) -> httpx.Response:
    return httpx.post(f"{served.url}/v1/search", json=body, headers=auth(token), timeout=30)


def globex_ids(kb: ServedKb, served: Served, tokens: dict[str, Any]) -> list[str]:
    r = search(served, tokens["globex"]["token"], query="dispatch_request", k=20)
    assert r.status_code == 200, r.text
    ids = [h["id"] for h in r.json()["results"]]
    assert ids and all(h["metadata"]["tenantId"] == "globex" for h in r.json()["results"])
    return ids


def test_healthz_and_search_results_carry_where_and_what(served: Served, tokens: Any) -> None:
    assert httpx.get(f"{served.url}/healthz").json() == {"status": "ok"}
    r = search(served, tokens["acme"]["token"], query="dispatch_request", k=5)
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    top = results[0]
    assert top["name"] == "dispatch_request" or top["qualifiedName"].endswith("dispatch_request")
    assert top["path"] == "widgets/dispatch.py" and top["repo"] == "widgets"
    assert top["startLine"] == 1 and top["endLine"] >= 3
    assert "def dispatch_request" in top["document"]
    assert {"id", "score", "kind", "revision", "metadata"} <= set(top)
    assert all(h["metadata"]["tenantId"] == "acme" for h in results)
    filtered = search(served, tokens["acme"]["token"], query="validator", language="go", k=5)
    assert filtered.status_code == 200, filtered.text
    assert {h["language"] for h in filtered.json()["results"]} == {"go"}
    globbed = search(served, tokens["acme"]["token"], query="power", path="gadget*", k=5).json()
    assert globbed["results"] and {h["path"] for h in globbed["results"]} == {"gadget.py"}
    unit = search(served, tokens["acme"]["token"], query="dispatch", unit="*dispatch_request")
    assert unit.status_code == 200, unit.text
    assert {h["qualifiedName"] for h in unit.json()["results"]} == {
        "widgets.dispatch.dispatch_request"
    }
    typo = search(served, tokens["acme"]["token"], query="dispatch", kind="fucntion")
    assert typo.status_code == 400 and "'fucntion' is not one of" in typo.text


HOSTILE_BODIES = [
    {"query": "dispatch_request globex_vault_secret", "k": 100},
    {"query": FOREIGN_MARK, "k": 100, "path": "vault*"},
    {"query": FOREIGN_MARK, "k": 100, "path": "*vault.py"},
    {"query": FOREIGN_MARK, "k": 100, "kind": "function"},
    {"query": FOREIGN_MARK, "k": 100, "language": "python"},
    {"query": FOREIGN_MARK, "k": 100, "unit": "*"},
    {"query": FOREIGN_MARK, "k": 100, "expand": True},
]


@pytest.mark.parametrize("body", HOSTILE_BODIES)
def test_a_token_of_acme_never_returns_a_row_of_globex(
    served: Served, tokens: Any, body: dict[str, Any]
) -> None:
    r = search(served, tokens["acme"]["token"], **body)
    assert r.status_code == 200, r.text
    text = r.text
    assert FOREIGN_MARK not in text and '"globex"' not in text and "vault" not in text


@pytest.mark.parametrize(
    "body",
    [
        {"query": "x", "repo": "vault"},  # globex's repo
        {"query": "x", "repo": "no-such-repo"},
        {"query": "x", "repo": "widgets' OR tenantId != 'acme"},
    ],
)
def test_naming_a_repo_not_ones_own_is_403_and_reveals_nothing(
    served: Served, tokens: Any, body: dict[str, Any]
) -> None:
    r = search(served, tokens["acme"]["token"], **body)
    assert r.status_code == 403, r.text
    error = r.json()["error"]
    assert error["code"] == "AUTH_FORBIDDEN" and error["field"] == "repo"
    # The same words whether or not another tenant has such a repo.
    other = search(served, tokens["acme"]["token"], query="x", repo="zz").json()["error"]
    assert error["message"].replace(repr(body["repo"]), "R") == other["message"].replace(
        repr("zz"), "R"
    )


def test_another_tenants_chunk_id_is_not_found_like_an_unknown_one(
    kb: ServedKb, served: Served, tokens: Any
) -> None:
    acme = auth(tokens["acme"]["token"])
    for cid in globex_ids(kb, served, tokens):
        for path in (f"/v1/chunks/{cid}", f"/v1/chunks/{cid}/related"):
            r = httpx.get(f"{served.url}{path}", headers=acme)
            assert r.status_code == 404, r.text
            assert r.json()["error"]["message"] == f"no chunk {cid} among your repos"
    unknown = "0" * 64
    r = httpx.get(f"{served.url}/v1/chunks/{unknown}", headers=acme)
    assert r.status_code == 404 and r.json()["error"]["code"] == "QUERY_NOT_FOUND"
    bad = httpx.get(f"{served.url}/v1/chunks/..%2F..%2Fetc", headers=acme)
    assert bad.status_code in (400, 404)
    own = search(served, tokens["acme"]["token"], query="render_widget", k=1).json()["results"][0]
    got = httpx.get(f"{served.url}/v1/chunks/{own['id']}", headers=acme)
    assert got.status_code == 200 and got.json()["document"] == own["document"]
    repos = httpx.get(f"{served.url}/v1/repos", headers=acme).json()
    assert repos["tenantId"] == "acme"
    assert sorted(r["repoSlug"] for r in repos["repos"]) == ["gadgets", "widgets"]
    assert all(r["servedRows"] > 0 and r["outcome"] == "complete" for r in repos["repos"])


def test_a_repo_subset_token_reads_only_its_repos(served: Served, tokens: Any) -> None:
    token = tokens["widgets"]["token"]
    assert tokens["widgets"]["repos"] == ["widgets"]
    r = search(served, token, query="gadget_power", k=50)
    assert r.status_code == 200 and {h["repo"] for h in r.json()["results"]} == {"widgets"}
    assert search(served, token, query="x", repo="gadgets").status_code == 403
    repos = httpx.get(f"{served.url}/v1/repos", headers=auth(token)).json()["repos"]
    assert [r["repoSlug"] for r in repos] == ["widgets"]


def test_missing_unknown_malformed_and_revoked_tokens_are_401(kb: ServedKb, served: Served) -> None:
    url = f"{served.url}/v1/search"
    body = {"query": "dispatch_request"}
    assert httpx.post(url, json=body).status_code == 401
    assert httpx.post(url, json=body, headers={"Authorization": "Basic abc"}).status_code == 401
    fake = "neo_" + "0" * 16 + "_" + "A" * 43
    for token in (fake, "not-a-token", "neo_" + "1" * 200):
        r = httpx.post(url, json=body, headers=auth(token))
        assert r.status_code == 401 and r.json()["error"]["code"] == "AUTH_UNKNOWN_TOKEN"
        assert r.headers["www-authenticate"] == "Bearer"
    issued = kb.issue("acme", name="short-lived")
    assert httpx.post(url, json=body, headers=auth(issued["token"])).status_code == 200
    # A right id with a wrong secret is unknown too.
    forged = issued["token"][:-4] + ("AAAA" if not issued["token"].endswith("AAAA") else "BBBB")
    assert httpx.post(url, json=body, headers=auth(forged)).status_code == 401
    done = kb.cli("token", "revoke", issued["id"])
    assert done.returncode == 0, done.stderr
    r = httpx.post(url, json=body, headers=auth(issued["token"]))
    assert r.status_code == 401 and r.json()["error"]["code"] == "AUTH_REVOKED_TOKEN"
    listed = kb.cli("token", "list", "--json")
    assert listed.returncode == 0 and issued["token"] not in listed.stdout
    row = next(t for t in json.loads(listed.stdout)["tokens"] if t["id"] == issued["id"])
    assert row["revokedAt"] is not None and "token" not in row
    log = served.log()
    assert "refused POST /v1/search: AUTH_REVOKED_TOKEN" in log
    assert issued["token"] not in log and issued["token"].split("_")[-1] not in log


def raw(served: Served, token: str, content: bytes, ctype: str = "application/json"):
    return httpx.post(
        f"{served.url}/v1/search",
        content=content,
        headers={**auth(token), "Content-Type": ctype},
        timeout=30,
    )


@pytest.mark.parametrize(
    ("content", "ctype", "status", "field"),
    [
        (b'{"query": ""}', "application/json", 400, "query"),
        (b'{"query": "   "}', "application/json", 400, "query"),
        (json.dumps({"query": "x" * 5000}).encode(), "application/json", 400, "query"),
        (json.dumps({"query": "x" * 10_000_000}).encode(), "application/json", 413, "body"),
        (b'{"query": "x", "k": 0}', "application/json", 400, "k"),
        (b'{"query": "x", "k": 1000000000}', "application/json", 400, "k"),
        (b'{"query": "x", "k": "5"}', "application/json", 400, "k"),
        (b'{"query": "x", "k": true}', "application/json", 400, "k"),
        (b'{"query": "x", "tenant": "globex"}', "application/json", 400, "tenant"),
        (b'{"query": "x", "where": {"tenantId": "globex"}}', "application/json", 400, "where"),
        (b'{"query": "x", "repo": {"$ne": "x"}}', "application/json", 400, "repo"),
        (b'{"query": "x", "path": "**"}', "application/json", 400, "path"),
        (b'{"query": "x", "path": "*/*"}', "application/json", 400, "path"),
        (b'{"query": "x", "expand": "yes"}', "application/json", 400, "expand"),
        (b'{"query": "x",', "application/json", 400, "body"),
        (b'["query"]', "application/json", 400, None),
        (b'{"query": "caf\xe9"}', "application/json", 400, "body"),
        (b'{"query": "x"}', "text/plain", 415, "content-type"),
    ],
)
def test_bad_input_is_a_4xx_json_error_naming_the_field(
    served: Served, tokens: Any, content: bytes, ctype: str, status: int, field: str | None
) -> None:
    r = raw(served, tokens["acme"]["token"], content, ctype)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["field"] == field and error["code"] and error["message"]
    assert "Traceback" not in r.text


def test_mcp_client_lists_tools_and_searches_as_its_tenant(
    kb: ServedKb, served: Served, tokens: Any
) -> None:
    foreign = set(globex_ids(kb, served, tokens))

    async def go() -> tuple[set[str], Any, Any, Any]:
        headers = auth(tokens["acme"]["token"])
        async with httpx2.AsyncClient(headers=headers, timeout=30) as client:
            async with streamable_http_client(f"{served.url}/mcp", http_client=client) as (
                read,
                write,
                *_,
            ):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    listed = await session.list_tools()
                    found = await session.call_tool(
                        "search_code", {"query": "dispatch_request", "k": 10}
                    )
                    chunk = await session.call_tool("get_chunk", {"id": sorted(foreign)[0]})
                    repos = await session.call_tool("list_repos", {})
        return {t.name for t in listed.tools}, found, chunk, repos

    names, found, chunk, repos = anyio.run(go)
    assert names == {"search_code", "get_chunk", "related_chunks", "list_repos"} | CODE_TOOLS
    assert not found.is_error
    results = found.structured_content["results"]
    assert results and all(h["metadata"]["tenantId"] == "acme" for h in results)
    assert results[0]["path"] == "widgets/dispatch.py"
    assert not {h["id"] for h in results} & foreign
    assert chunk.is_error and "QUERY_NOT_FOUND" in chunk.content[0].text
    assert FOREIGN_MARK not in chunk.content[0].text
    assert sorted(r["repoSlug"] for r in repos.structured_content["repos"]) == [
        "gadgets",
        "widgets",
    ]


def test_mcp_refuses_a_missing_or_revoked_token(kb: ServedKb, served: Served) -> None:
    issued = kb.issue("acme")

    async def call(token: str | None) -> Any:
        headers = auth(token) if token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as client:
            async with streamable_http_client(f"{served.url}/mcp", http_client=client) as (
                read,
                write,
                *_,
            ):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await session.call_tool("search_code", {"query": "dispatch_request"})

    assert not anyio.run(call, issued["token"]).is_error
    assert kb.cli("token", "revoke", issued["id"]).returncode == 0
    # Refused at the HTTP layer (401) before `initialize`: the client cannot even start.
    for token in (issued["token"], None):
        with pytest.raises(BaseException) as refused:  # noqa: PT011 - the SDK's own wrapping
            anyio.run(call, token)
        assert "Server returned an error response" in repr(refused.value)
    answer = httpx.post(
        f"{served.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={**auth(issued["token"]), "Accept": "application/json, text/event-stream"},
        timeout=10,
    )
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "AUTH_REVOKED_TOKEN"


def test_token_cli_refuses_an_undeclared_tenant_or_repo(kb: ServedKb) -> None:
    for args in (["--tenant", "nobody"], ["--tenant", "acme", "--repo", "vault"]):
        done = kb.cli("token", "issue", *args, "--json")
        assert done.returncode == 2 and "error" in json.loads(done.stdout)
    assert kb.cli("token", "revoke", "0" * 16).returncode == 2


def test_mcp_on_stdio_reads_as_the_token_in_neo_token(
    kb: ServedKb, tokens: Any, tmp_path: Path
) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "neo_assets.cli", "mcp"],
        env=kb.env | {"NEO_TOKEN": tokens["widgets"]["token"]},
        cwd=ROOT,
    )

    async def go() -> tuple[set[str], Any]:
        with (tmp_path / "mcp-stderr.log").open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    listed = await session.list_tools()
                    found = await session.call_tool("search_code", {"query": "gadget_power"})
        return {t.name for t in listed.tools}, found

    names, found = anyio.run(go)
    assert names == {"search_code", "get_chunk", "related_chunks", "list_repos"} | CODE_TOOLS
    assert not found.is_error
    results = found.structured_content["results"]
    assert results and {h["repo"] for h in results} == {"widgets"}  # the token's subset
    missing = kb.cli("mcp")  # NEO_TOKEN unset: a usage error naming it
    assert missing.returncode == 2 and "NEO_TOKEN is not set" in missing.stderr


def test_one_token_past_its_concurrency_gets_429_while_another_token_is_served(
    kb: ServedKb,
) -> None:
    """NEO_SERVE_PER_TOKEN_CONCURRENCY=1: a burst of one token's searches is partly
    refused (429, JSON naming the limit) while another token's searches, sent in the same
    burst, are all answered: one agent cannot starve the rest."""
    greedy = kb.issue("acme", name="greedy agent")["token"]
    other = kb.issue("globex", name="patient agent")["token"]
    body = {"query": "dispatch_request render widget", "k": 100, "expand": True}

    async def burst(url: str) -> tuple[list[httpx.Response], list[httpx.Response]]:
        async with httpx.AsyncClient(timeout=60) as client:

            async def send(token: str) -> httpx.Response:
                return await client.post(f"{url}/v1/search", json=body, headers=auth(token))

            greedy_calls = [send(greedy) for _ in range(24)]
            other_calls = [send(other) for _ in range(1)]
            answers = await asyncio.gather(*greedy_calls, *other_calls)
            return list(answers[:24]), list(answers[24:])

    with kb.serve(NEO_SERVE_PER_TOKEN_CONCURRENCY="1") as svc:
        greedy_answers, other_answers = asyncio.run(burst(svc.url))
    statuses = [r.status_code for r in greedy_answers]
    assert set(statuses) <= {200, 429}, statuses
    assert 429 in statuses and 200 in statuses, statuses
    refused = next(r for r in greedy_answers if r.status_code == 429).json()["error"]
    assert "NEO_SERVE_PER_TOKEN_CONCURRENCY" in refused["message"]
    assert [r.status_code for r in other_answers] == [200]
