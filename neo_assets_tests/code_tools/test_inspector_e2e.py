"""The official MCP Inspector (its CLI mode, ``--strict``) finds nothing to report in the
tools ``neo-assets serve`` lists over MCP, and calls each tool through the mcp SDK client
it ships (which checks every structured answer against the tool's output schema). Real
``serve`` on loopback over a knowledge base swept from real git repos; the Inspector is a
real node process. Beside it, a schema lint of our own: every argument described, every
integer bounded, every enum-like argument enumerated, no bare output schema, no object
that neither names its properties nor says what it holds."""

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from neo_assets_tests.extras import require_mcp_inspector
from neo_assets_tests.serve.service_harness import Served, ServedKb

TOOLS = {
    "search_code",
    "get_chunk",
    "related_chunks",
    "list_repos",
    "find_symbol",
    "find_references",
    "grep",
    "read_file",
    "list_files",
}
# Arguments an agent would otherwise have to guess the values of.
ENUMERATED = {"kind", "language"}


@pytest.fixture
def exe() -> str:
    """The Inspector, checked before the knowledge base is built (a skip costs nothing)."""
    return require_mcp_inspector()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, str]]:
    kb = ServedKb.build(tmp_path_factory.mktemp("inspector"))
    token = kb.issue("acme")["token"]
    with kb.serve() as svc:
        yield svc, token


def inspector(
    exe: str, served: tuple[Served, str], tmp_path: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    svc, token = served
    # Its catalog and client config go to the test's directory, not the user's home.
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "MCP_CATALOG_PATH": str(tmp_path / "catalog.json"),
        "MCP_CLIENT_CONFIG_PATH": str(tmp_path / "client.json"),
        "NO_COLOR": "1",
    }
    command = [
        exe,
        "--cli",
        "--transport",
        "http",
        "--server-url",
        f"{svc.url}/mcp",
        "--header",
        f"Authorization: Bearer {token}",
        "--format",
        "json",
        *args,
    ]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def test_the_inspector_strict_listing_reports_nothing(
    exe: str, served: tuple[Served, str], tmp_path: Path
) -> None:
    done = inspector(exe, served, tmp_path, "--method", "tools/list", "--strict")
    # --strict prints every portability problem (path, issue, fix) on stderr and exits 6
    # on an error-severity one; a warning (e.g. an untyped argument) exits 0, so it is
    # caught here by what is said: a clean listing says nothing and finds nothing.
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "", done.stderr
    out = json.loads(done.stdout)
    assert [f for t in out.get("schemaFindings", []) for f in t["findings"]] == []
    listed = out["result"]
    assert {t["name"] for t in listed["tools"]} == TOOLS


def calls_of(served: tuple[Served, str]) -> list[tuple[str, dict[str, Any]]]:
    """One valid call of each tool over this knowledge base (a chunk id from a search)."""

    async def first_chunk() -> str:
        svc, token = served
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as client:
            async with streamable_http_client(f"{svc.url}/mcp", http_client=client) as (
                read,
                write,
                *_,
            ):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    found = await session.call_tool("search_code", {"query": "dispatch"})
        return str(found.structured_content["results"][0]["id"])

    chunk = anyio.run(first_chunk)
    return [
        ("search_code", {"query": "dispatch a request", "k": 3}),
        ("get_chunk", {"id": chunk}),
        ("related_chunks", {"id": chunk}),
        ("list_repos", {}),
        ("find_symbol", {"name": "dispatch_request", "kind": "function"}),
        ("find_references", {"name": "ExactArgs", "repo": "widgets"}),
        ("grep", {"pattern": "def \\w+", "repo": "widgets", "case_sensitive": True}),
        ("read_file", {"repo": "widgets", "path": "widgets/args.go", "start_line": 1}),
        ("list_files", {"repo": "widgets", "path_glob": "widgets/*"}),
    ]


def test_the_inspector_calls_every_tool_and_its_answers_fit_their_schemas(
    exe: str, served: tuple[Served, str], tmp_path: Path
) -> None:
    calls = calls_of(served)
    assert {name for name, _ in calls} == TOOLS
    for name, arguments in calls:
        done = inspector(
            exe,
            served,
            tmp_path,
            "--method",
            "tools/call",
            "--tool-name",
            name,
            "--tool-args-json",
            json.dumps(arguments),
        )
        assert done.returncode == 0, (name, done.stdout, done.stderr)
        answer = json.loads(done.stdout)["result"]
        assert not answer.get("isError"), (name, answer)
        assert isinstance(answer.get("structuredContent"), dict), (name, answer)


def lint(name: str, where: str, schema: dict[str, Any], problems: list[str]) -> None:
    """Our schema lint, over one (sub)schema: an object names its properties (and each
    property of an input is described), an integer is bounded, an array says its items."""
    kind = schema.get("type")
    if kind is None and not any(k in schema for k in ("anyOf", "oneOf", "enum", "$ref")):
        problems.append(f"{name}{where}: no type")
    # An object names its properties, or (a free-form map such as a chunk's metadata)
    # says what it holds; an input without arguments says so with empty properties.
    bare = "properties" not in schema if where == " input" else not schema.get("properties")
    if kind == "object" and bare and not schema.get("description"):
        problems.append(f"{name}{where}: a bare object")
    if where == " output" and not schema.get("properties"):
        problems.append(f"{name}{where}: a bare output schema")
    for arg, prop in (schema.get("properties") or {}).items():
        if where.startswith(" input") and not prop.get("description"):
            problems.append(f"{name}{where}.{arg}: not described")
        if where == " input" and arg in ENUMERATED and "enum" not in prop:
            problems.append(f"{name}{where}.{arg}: no enum")
        lint(name, f"{where}.{arg}", prop, problems)
    if kind == "integer" and ("minimum" not in schema or "maximum" not in schema):
        if where.startswith(" input"):
            problems.append(f"{name}{where}: no range")
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, dict):
            problems.append(f"{name}{where}: items unsaid")
        else:
            lint(name, f"{where}[]", items, problems)
    for sub in schema.get("anyOf", []) + schema.get("oneOf", []):
        lint(name, where, sub, problems)


def test_every_tool_schema_passes_the_lint(served: tuple[Served, str]) -> None:
    async def listed() -> Any:
        svc, token = served
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as client:
            async with streamable_http_client(f"{svc.url}/mcp", http_client=client) as (
                read,
                write,
                *_,
            ):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await session.list_tools()

    tools = anyio.run(listed).tools
    assert {t.name for t in tools} == TOOLS
    problems: list[str] = []
    for t in tools:
        if not (t.description or "").strip() or "``" in t.description:
            problems.append(f"{t.name}: description missing or not plain text")
        lint(t.name, " input", t.input_schema, problems)
        if not t.output_schema:
            problems.append(f"{t.name}: no output schema")
        else:
            lint(t.name, " output", t.output_schema, problems)
    assert problems == [], "\n".join(problems)
