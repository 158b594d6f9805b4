"""The code tools end to end: real git repos swept through Dagster (the hashing embedder),
``neo-assets serve`` in a subprocess, real clients (httpx; the mcp SDK over streamable
HTTP and over stdio). Each answer is checked against the repo itself: every def / func /
function of a file is found by find_symbol at its line, grep equals ``git grep -n`` at
the indexed revision, read_file equals ``git show``; and tenant globex's files never
appear in acme's answers, whatever repo or path acme sends. Beside small made repos, the
published ky package (real code: npm's tarball, committed as a git repo here)."""

import re
import subprocess
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

from neo_assets_tests.extras import require_ky_tarball
from neo_assets_tests.gitrepo import git_env
from neo_assets_tests.serve.service_harness import ROOT, Served, ServedKb

FOREIGN_MARK = "globex_vault_secret"
TOOL_NAMES = {"find_symbol", "find_references", "grep", "read_file", "list_files"}

REPOS = {
    ("acme", "tools"): {
        "app/dispatch.py": (
            "import os\n\n\n"
            "def dispatch_request(request):\n"
            '    """Route a request to its handler."""\n'
            "    return HANDLERS[request.path](request)\n\n\n"
            "class Router:\n"
            "    def add_route(self, rule, view):\n"
            "        self.rules.append((rule, view))\n\n"
            "    def match(self, path):\n"
            "        return dispatch_request(path)\n\n\n"
            "def render_widget(widget):\n"
            "    # dispatch_request is not called here\n"
            "    return f'<div>{widget}</div>'\n"
        ),
        "app/args.go": (
            "package app\n\n"
            "// ExactArgs returns a validator that wants exactly n arguments.\n"
            "func ExactArgs(n int) func([]string) error {\n"
            "\treturn func(args []string) error { return nil }\n"
            "}\n\n"
            "func MinimumNArgs(n int) func([]string) error {\n"
            "\treturn ExactArgs(n)\n"
            "}\n"
        ),
        "web/retry.js": (
            "export function calculateDelay(attempt) {\n"
            "  return 2 ** attempt * 100;\n"
            "}\n\n"
            "export class Retrier {\n"
            "  retry(fn) {\n"
            "    return fn(calculateDelay(1));\n"
            "  }\n"
            "}\n\n"
            "function aaaa() { return '" + "a" * 50 + "b'; }\n"
        ),
        "README.md": "# tools\n\nDispatch requests; retry with a delay.\n",
    },
    ("acme", "other"): {"other.py": "def other_thing():\n    return dispatch_request(1)\n"},
    ("globex", "vault"): {
        "vault.py": (
            "def dispatch_request(secret_request):\n"
            "    # globex_vault_secret: only globex may ever read this\n"
            "    return VAULT[secret_request]\n"
        )
    },
}
# What find_symbol must find in each file: every definition a plain regex sees.
DEFS = {
    ".py": re.compile(r"^\s*(?:def|class)\s+(\w+)", re.M),
    ".go": re.compile(r"^func\s+(\w+)", re.M),
    ".js": re.compile(r"^(?:export\s+)?(?:function|class)\s+(\w+)", re.M),
    ".ts": re.compile(r"^\s*(?:export\s+)?(?:async\s+)?(?:function|class)\s+(\w+)", re.M),
}
PATTERNS = [
    "dispatch_request",
    r"^def ",
    r"return \w+\(",
    r"\(n int\)",
    "a+b",
    r"[A-Z][a-z]+Args",
    "beforeRetry|RetryOptions",
]


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> ServedKb:
    tarball = require_ky_tarball()
    root = tmp_path_factory.mktemp("tools-kb")
    ky = root / "ky-copy"
    ky.mkdir()
    subprocess.run(["tar", "xzf", str(tarball), "-C", str(ky), "--strip-components=1"], check=True)
    for step in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "ky 1.14.3"]):
        subprocess.run(["git", *step], cwd=ky, check=True, env=git_env())
    return ServedKb.build(root, REPOS, existing={("acme", "ky"): ky})


@pytest.fixture(scope="module")
def served(kb: ServedKb) -> Iterator[Served]:
    with kb.serve(NEO_SERVE_PER_TOKEN_CONCURRENCY="8") as svc:
        yield svc


@pytest.fixture(scope="module")
def tokens(kb: ServedKb) -> dict[str, str]:
    return {
        "acme": kb.issue("acme")["token"],
        "acme_tools": kb.issue("acme", "tools")["token"],
        "globex": kb.issue("globex")["token"],
    }


def tool(served: Served, token: str, tool_name: str, /, **body: Any) -> httpx.Response:
    return httpx.post(
        f"{served.url}/v1/{tool_name}",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )


def ok(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 200, r.text
    return r.json()


def repo_dir(kb: ServedKb, slug: str) -> Path:
    return kb.root / ("ky-copy" if slug == "ky" else f"acme-{slug}")


def git(kb: ServedKb, slug: str, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=repo_dir(kb, slug),
        env=git_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr  # git grep: 1 = no match
    return done.stdout


def test_every_definition_of_each_file_is_found_at_its_line(
    kb: ServedKb, served: Served, tokens: dict[str, str]
) -> None:
    checked = 0
    for slug, paths in (
        ("tools", ["app/dispatch.py", "app/args.go", "web/retry.js"]),
        (
            "ky",
            [
                "distribution/core/Ky.js",
                "distribution/utils/merge.js",
                "distribution/utils/type-guards.js",
                "distribution/errors/HTTPError.js",
            ],
        ),
    ):
        listed = ok(tool(served, tokens["acme"], "list_files", repo=slug))
        revision = listed["revision"]
        assert revision == git(kb, slug, "rev-parse", "HEAD").strip()
        for path in paths:
            text = git(kb, slug, "show", f"{revision}:{path}")
            lines = text.split("\n")
            for m in DEFS[Path(path).suffix].finditer(text):
                name = m.group(1)
                line = text.count("\n", 0, m.start(1)) + 1
                found = ok(tool(served, tokens["acme"], "find_symbol", name=name, repo=slug))
                hits = [
                    s
                    for s in found["symbols"]
                    if s["path"] == path and s["match"] == "exact" and s["signatureLine"] == line
                ]
                assert hits, (path, name, line, found)
                assert hits[0]["startLine"] <= line <= hits[0]["endLine"]
                assert hits[0]["signature"] == lines[line - 1][:500]
                checked += 1
    assert checked >= 17


def test_grep_equals_git_grep_at_the_indexed_revision(
    kb: ServedKb, served: Served, tokens: dict[str, str]
) -> None:
    for slug in ("tools", "ky"):
        revision = git(kb, slug, "rev-parse", "HEAD").strip()
        blank = [r"^\s*$"] if slug == "tools" else []  # many blank lines in ky
        for pattern in [*PATTERNS, *blank, "throw new", r"timeout\s*[:=]"]:
            for case_sensitive in (True, False):
                flags = ["-n", "-I", "-P"] + ([] if case_sensitive else ["-i"])
                expected = set()
                for row in git(kb, slug, "grep", *flags, "-e", pattern, revision).splitlines():
                    _rev, path, line, _text = row.split(":", 3)
                    expected.add((path, int(line)))
                got = ok(
                    tool(
                        served,
                        tokens["acme"],
                        "grep",
                        pattern=pattern,
                        repo=slug,
                        case_sensitive=case_sensitive,
                        max_results=1000,
                    )
                )
                assert not got["truncated"], (slug, pattern, got["truncatedBy"])
                assert {(m["path"], m["line"]) for m in got["matches"]} == expected, (
                    slug,
                    pattern,
                    case_sensitive,
                )
    hit = ok(tool(served, tokens["acme"], "grep", pattern=r"fn\(calculateDelay", repo="tools"))
    assert hit["matches"][0]["unit"]["name"] == "Retrier.retry"


def test_read_file_equals_git_show_and_references_name_their_units(
    kb: ServedKb, served: Served, tokens: dict[str, str]
) -> None:
    text = git(kb, "ky", "show", "HEAD:distribution/core/Ky.js").split("\n")
    got = ok(
        tool(
            served,
            tokens["acme"],
            "read_file",
            repo="ky",
            path="distribution/core/Ky.js",
            start_line=10,
            end_line=30,
        )
    )
    assert got["text"] == "\n".join(text[9:30])
    assert (got["startLine"], got["endLine"], got["truncated"]) == (10, 30, True)
    refs = ok(tool(served, tokens["acme"], "find_references", name="dispatch_request"))
    where = {(r["repo"], r["path"], r["line"]) for r in refs["references"]}
    # The call in Router.match, the comment in render_widget, the call in other.py; the
    # definition line itself is not a use.
    assert where == {
        ("tools", "app/dispatch.py", 14),
        ("tools", "app/dispatch.py", 18),
        ("other", "other.py", 2),
    }
    units = {r["line"]: r["unit"]["name"] for r in refs["references"]}
    assert units == {14: "Router.match", 18: "render_widget", 2: "other_thing"}


HOSTILE_REPOS = [
    "vault",
    "../globex-vault",
    "globex/vault",
    "/tmp",
    "tools/../vault",
    "*",
    "vault\u200b",
]
HOSTILE_PATHS = [
    "../globex-vault/vault.py",
    "vault.py",
    "/etc/passwd",
    "app/../../globex-vault/vault.py",
    "..",
    "app/dispatch.py/../../../globex-vault/vault.py",
]


def test_tenant_b_never_appears_under_hostile_repo_and_path_values(
    kb: ServedKb, served: Served, tokens: dict[str, str]
) -> None:
    vault = str(kb.root / "globex-vault")
    seen = []
    for repo in HOSTILE_REPOS + [vault]:
        for name, body in (
            ("find_symbol", {"name": "dispatch_request"}),
            ("find_references", {"name": "VAULT"}),
            ("grep", {"pattern": "secret"}),
            ("list_files", {}),
            ("read_file", {"path": "vault.py"}),
        ):
            r = tool(served, tokens["acme"], name, repo=repo, **body)
            assert r.status_code == 403, (name, repo, r.text)
            seen.append(r.text)
    for path in HOSTILE_PATHS + [f"{vault}/vault.py"]:
        r = tool(served, tokens["acme"], "read_file", repo="tools", path=path)
        assert r.status_code == 404, (path, r.text)
        seen.append(r.text)
        r = tool(served, tokens["acme"], "grep", pattern="secret|VAULT", path=path)
        seen.append(r.text)
        assert r.status_code == 200 and ok(r)["matches"] == []
    for glob in ("**/vault.py", "*vault*", "../*", "[v]ault.py"):
        for name, body in (
            ("grep", {"pattern": ".", "path": glob}),
            ("list_files", {"repo": "tools", "path_glob": glob}),
        ):
            r = tool(served, tokens["acme"], name, **body)
            seen.append(r.text)
            assert r.status_code == 200, r.text
    # Everything acme may read, unfiltered, holds none of globex's.
    for name, body in (
        ("grep", {"pattern": "secret|VAULT|globex", "max_results": 1000}),
        ("find_symbol", {"name": "dispatch_request"}),
        ("find_references", {"name": "VAULT"}),
    ):
        r = tool(served, tokens["acme"], name, **body)
        seen.append(r.text)
        hits = [h for k in ("symbols", "matches", "references") for h in ok(r).get(k, [])]
        assert {h["repo"] for h in hits} <= {"tools", "other", "ky"}
        assert "vault" not in set(ok(r)["revisions"])
    # A token limited to one repo reads only that one.
    r = ok(tool(served, tokens["acme_tools"], "find_symbol", name="other_thing"))
    assert r["symbols"] == [] and set(r["revisions"]) == {"tools"}
    assert tool(served, tokens["acme_tools"], "list_files", repo="other").status_code == 403
    joined = "\n".join(seen)
    assert FOREIGN_MARK not in joined
    # globex itself does read its own.
    own = ok(tool(served, tokens["globex"], "grep", pattern="globex_vault_secret"))
    assert [m["path"] for m in own["matches"]] == ["vault.py"]


def test_a_catastrophic_regex_is_answered_in_linear_time_or_refused(
    served: Served, tokens: dict[str, str]
) -> None:
    got = ok(tool(served, tokens["acme"], "grep", pattern=r"(a+)+$", repo="tools"))
    assert got["matches"] == [] and not got["truncated"]
    got = ok(tool(served, tokens["acme"], "grep", pattern=r"(a|aa)+b'", repo="tools"))
    assert [m["path"] for m in got["matches"]] == ["web/retry.js"]
    for pattern in (r"(a)\1", r"(?=a)", "((a{100}){100}){100}"):
        r = tool(served, tokens["acme"], "grep", pattern=pattern)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["field"] == "pattern"


def test_arguments_are_checked_alike_on_http_and_mcp(
    served: Served, tokens: dict[str, str]
) -> None:
    cases = [
        ("find_symbol", {"name": "x", "max_results": "5"}),
        ("find_symbol", {"name": "x", "kind": "func"}),
        ("find_symbol", {"name": "x", "language": "klingon"}),
        ("grep", {"pattern": "x", "case_sensitive": "false"}),
        ("grep", {"pattern": "x", "max_results": 0}),
        ("read_file", {"repo": "tools"}),
        ("read_file", {"repo": "tools", "path": "a", "start_line": 5, "end_line": 2}),
        ("list_files", {"repo": "tools", "path_glob": "**"}),
        ("list_files", {"repo": "tools", "extra": 1}),
        ("find_symbol", {"name": "x", "repo": "vault"}),
    ]
    http = []
    for name, body in cases:
        r = tool(served, tokens["acme"], name, **body)
        assert r.status_code in (400, 403), r.text
        e = r.json()["error"]
        http.append(f"{e['code']} ({e['field'] or '-'}): {e['message']}")

    async def go() -> tuple[Any, list[Any]]:
        headers = {"Authorization": f"Bearer {tokens['acme']}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as client:
            async with streamable_http_client(f"{served.url}/mcp", http_client=client) as (
                read,
                write,
                *_,
            ):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    listed = await session.list_tools()
                    return listed, [await session.call_tool(n, b) for n, b in cases]

    # search_code is checked by the same rules as POST /v1/search.
    cases.append(("search_code", {"query": "x", "k": "5"}))
    r = httpx.post(
        f"{served.url}/v1/search",
        json={"query": "x", "k": "5"},
        headers={"Authorization": f"Bearer {tokens['acme']}"},
        timeout=30,
    )
    e = r.json()["error"]
    http.append(f"{e['code']} ({e['field'] or '-'}): {e['message']}")
    listed, answers = anyio.run(go)
    for (name, _body), answer, expected in zip(cases, answers, http, strict=True):
        assert answer.is_error
        # The same refusal (after the SDK's prefix); the one that names a route names the
        # MCP tool instead.
        prefix = f"Error executing tool {name}: "
        assert answer.content[0].text.removeprefix(prefix) == expected.replace(
            "GET /v1/repos lists them", "the list_repos tool lists them"
        )
    assert "list_repos tool" in answers[-2].content[0].text
    tools = {t.name: t for t in listed.tools}
    assert TOOL_NAMES <= set(tools)
    assert set(tools) == TOOL_NAMES | {"search_code", "get_chunk", "related_chunks", "list_repos"}
    for name in tools:
        schema = tools[name].input_schema
        assert schema["additionalProperties"] is False
        for arg, prop in schema["properties"].items():
            assert prop.get("description"), (name, arg)
            assert "``" not in prop["description"]
        assert "``" not in tools[name].description
        assert tools[name].output_schema["type"] == "object"
    props = tools["find_symbol"].input_schema["properties"]
    assert props["kind"]["enum"] == ["class", "class-config", "function", "method", "type"]
    assert "typescript" in props["language"]["enum"]
    assert (props["max_results"]["minimum"], props["max_results"]["maximum"]) == (1, 200)
    search = tools["search_code"].input_schema["properties"]
    assert (search["k"]["minimum"], search["k"]["maximum"]) == (1, 100)
    assert {"function", "method", "class", "section"} <= set(search["kind"]["enum"])
    assert search["language"]["enum"] == props["language"]["enum"]


def test_mcp_tools_answer_over_streamable_http_and_stdio(
    kb: ServedKb, served: Served, tokens: dict[str, str], tmp_path: Path
) -> None:
    calls = [
        ("find_symbol", {"name": "Ky.constructor", "repo": "ky"}),
        ("grep", {"pattern": "ExactArgs", "repo": "tools"}),
        ("read_file", {"repo": "tools", "path": "app/args.go", "start_line": 4, "end_line": 4}),
        ("list_files", {"repo": "tools", "path_glob": "app/*"}),
        ("find_references", {"name": "calculateDelay", "repo": "tools"}),
    ]

    async def session_calls(session: ClientSession) -> list[Any]:
        await session.initialize()
        return [await session.call_tool(n, b) for n, b in calls]

    async def over_http() -> list[Any]:
        headers = {"Authorization": f"Bearer {tokens['acme']}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as client:
            async with streamable_http_client(f"{served.url}/mcp", http_client=client) as (
                read,
                write,
                *_,
            ):
                async with ClientSession(read, write) as session:
                    return await session_calls(session)

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "neo_assets.cli", "mcp"],
        env=kb.env | {"NEO_TOKEN": tokens["acme"]},
        cwd=ROOT,
    )

    async def over_stdio() -> list[Any]:
        with (tmp_path / "mcp-stderr.log").open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    return await session_calls(session)

    for answers in (anyio.run(over_http), anyio.run(over_stdio)):
        assert not any(a.is_error for a in answers), [a.content for a in answers]
        sym, grep, read, files, refs = (a.structured_content for a in answers)
        assert sym["symbols"][0]["name"] == "Ky.constructor"
        assert sym["symbols"][0]["match"] == "exact"
        assert {(m["path"], m["line"]) for m in grep["matches"]} == {
            ("app/args.go", 3),
            ("app/args.go", 4),
            ("app/args.go", 9),
        }
        assert read["text"] == "func ExactArgs(n int) func([]string) error {"
        assert [f["path"] for f in files["files"]] == ["app/args.go", "app/dispatch.py"]
        assert [(r["line"], r["unit"]["name"]) for r in refs["references"]] == [
            (7, "Retrier.retry")
        ]


def test_the_cli_answers_as_http_does(kb: ServedKb, served: Served, tokens: dict[str, str]) -> None:
    import json

    done = kb.cli("grep", "dispatch_request", "--tenant", "acme", "--path", "app/*", "--json")
    assert done.returncode == 0, done.stderr
    http = ok(tool(served, tokens["acme"], "grep", pattern="dispatch_request", path="app/*"))
    assert json.loads(done.stdout) == http
    done = kb.cli("find-symbol", "Router.match", "--tenant", "acme", "--repo", "tools", "--json")
    assert done.returncode == 0, done.stderr
    [sym] = json.loads(done.stdout)["symbols"]
    assert (sym["path"], sym["signatureLine"], sym["match"]) == ("app/dispatch.py", 13, "exact")
    # Another tenant's repo and a bad argument: usage errors (exit 2), one line, no traceback.
    for args in (
        ["read-file", "vault", "vault.py", "--tenant", "acme"],
        ["grep", "(a)\\1", "--tenant", "acme"],
        ["list-files", "tools", "--tenant", "nobody"],
    ):
        done = kb.cli(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr and FOREIGN_MARK not in done.stdout + done.stderr
