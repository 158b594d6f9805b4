"""The code index follows the generations (real sweeps through Dagster, a real git repo,
the fault-injecting embedding server): the tools answer at the revision the repo is served
at, never at one whose sweep has not completed (its index exists, but is not served),
switch when the checkpoint moves, and the old revision's index is reclaimed then. And
grep's bounds: a catastrophic pattern over a long line runs in linear time (RE2), a time
budget cuts an answer and says so."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from neo_assets.code_tools.index_store import file_rows, indexed_revisions
from neo_assets.code_tools.service import CodeTools
from neo_assets.config.settings import load_settings
from neo_assets.core import codes
from neo_assets.query.search import QueryService
from neo_assets.query.serving import Resident
from neo_assets_tests.fakes.fixtures import fault_server_fixture
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor
from neo_assets_tests.sweep_harness import DIMENSIONS, SLUG, TENANT, SweepEnv

server_module = fault_server_fixture(scope="module", dimensions=DIMENSIONS)


@pytest.fixture
def env(
    neo_home: Path,
    tmp_path: Path,
    server_module: FaultServerSupervisor,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[SweepEnv]:
    server_module.reset()
    made = SweepEnv.create(
        tmp_path,
        server_module,
        {"app.py": "def first_handler():\n    return 1\n", "long.txt": "a" * 200_000 + "\n"},
    )
    for name, value in made.env_vars().items():
        monkeypatch.setenv(name, value)
    yield made
    server_module.reset()
    made.close()


def tools_of(env: SweepEnv, grep_timeout_s: float = 5.0) -> CodeTools:
    resident = Resident(load_settings(), env.store, env.ledger)
    return CodeTools(QueryService(resident), grep_timeout_s)


def call(tools: CodeTools, tool: str, **body: Any) -> dict[str, Any]:
    return tools.call(tool, TENANT, [], body)


def test_the_tools_answer_at_the_served_revision_until_a_sweep_completes(
    env: SweepEnv, server_module: FaultServerSupervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert env.sweep(force=True)["outcome"] == codes.OUTCOME_COMPLETE
    first = env.head()
    tools = tools_of(env)
    found = call(tools, "find_symbol", name="first_handler")
    assert [s["path"] for s in found["symbols"]] == ["app.py"]
    assert found["revisions"] == {SLUG: first}

    second = env.commit({"app.py": "def second_handler():\n    return 2\n"})
    server_module.refuse()  # the provider is down: the sweep cannot complete
    # Not waited for as a server that may be starting: that wait is not this test's subject.
    monkeypatch.setenv("NEO_EMBEDDING_UNREACHABLE_WAIT_S", "0.3")
    try:
        deferred = env.sweep(force=True)
    finally:
        server_module.resume()
    assert deferred["outcome"] != codes.OUTCOME_COMPLETE, deferred
    # The new revision's index was written by the chunk stage, but is not served: the
    # repo is served at its last complete revision, and so are the tools.
    assert sorted(indexed_revisions(env.ledger, TENANT)[SLUG]) == sorted([first, second])
    assert call(tools, "find_symbol", name="second_handler", kind="function")["symbols"] == []
    read = call(tools, "read_file", repo=SLUG, path="app.py")
    assert (read["revision"], read["text"]) == (first, "def first_handler():\n    return 1")

    assert env.sweep(force=True)["outcome"] == codes.OUTCOME_COMPLETE
    found = call(tools, "find_symbol", name="second_handler")
    assert [(s["path"], s["match"]) for s in found["symbols"]] == [("app.py", "exact")]
    read = call(tools, "read_file", repo=SLUG, path="app.py")
    assert (read["revision"], read["text"]) == (second, "def second_handler():\n    return 2")
    # The first revision's index went with its generation.
    assert indexed_revisions(env.ledger, TENANT)[SLUG] == [second]


def test_grep_is_linear_on_a_catastrophic_pattern_and_cut_at_its_time_bound(
    env: SweepEnv,
) -> None:
    assert env.sweep(force=True)["outcome"] == codes.OUTCOME_COMPLETE
    tools = tools_of(env)
    # Exponential for a backtracking engine on 200,000 a's without the b; RE2 answers
    # within the time bound, complete.
    for pattern in (r"(a+)+b", r"(a|aa)*c", r"(a*)*$"):
        got = call(tools, "grep", pattern=pattern, repo=SLUG)
        assert got["truncatedBy"] is None, pattern
    assert [m["path"] for m in call(tools, "grep", pattern=r"(a*)*$")["matches"]] == [
        "app.py",
        "app.py",
        "long.txt",
    ]
    assert len(call(tools, "grep", pattern="a{50}")["matches"][0]["text"]) == 501  # clipped
    cut = call(tools_of(env, grep_timeout_s=1e-9), "grep", pattern="handler")
    assert (cut["truncated"], cut["truncatedBy"], cut["matches"]) == (True, "time", [])
    capped = call(tools, "grep", pattern=".", max_results=1)
    assert (capped["truncatedBy"], len(capped["matches"])) == ("max_results", 1)


def test_a_one_file_commit_writes_one_file_row_and_the_rest_are_reused(
    env: SweepEnv,
) -> None:
    env.commit({f"pkg/mod{i}.py": f"def handler_{i}():\n    return {i}\n" for i in range(6)})
    assert env.sweep(force=True)["outcome"] == codes.OUTCOME_COMPLETE
    first = env.head()
    files = 8  # app.py, long.txt and the six modules
    assert file_rows(env.ledger, TENANT, SLUG) == files
    before = last_rowid(env)
    second = env.commit({"pkg/mod3.py": "def handler_three():\n    return 3\n"})
    assert env.sweep(force=True)["outcome"] == codes.OUTCOME_COMPLETE
    # Only the changed file's row was written (the sweep runs in another process: counted
    # by row id); its old row went with the first
    # revision's map, every other row serves both revisions.
    assert rows_after(env, before) == 1
    assert file_rows(env.ledger, TENANT, SLUG) == files
    assert indexed_revisions(env.ledger, TENANT)[SLUG] == [second]
    tools = tools_of(env)
    found = call(tools, "find_symbol", name="handler_three")["symbols"]
    assert [(s["path"], s["startLine"]) for s in found] == [("pkg/mod3.py", 1)]
    gone = call(tools, "find_symbol", name="handler_3")["symbols"]
    assert [s for s in gone if s["name"] == "handler_3"] == []
    kept = call(tools, "find_symbol", name="handler_5")["symbols"]
    assert [(s["path"], s["match"]) for s in kept if s["name"] == "handler_5"] == [
        ("pkg/mod5.py", "exact")
    ]
    assert first != second


def last_rowid(env: SweepEnv) -> int:
    """The newest row's id in ``code_index_files`` (SQLite gives a rewritten row a new one)."""
    with env.ledger.engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT max(rowid) FROM code_index_files")).scalar_one())


def rows_after(env: SweepEnv, rowid: int) -> int:
    """How many rows of ``code_index_files`` were written after ``rowid``."""
    with env.ledger.engine.connect() as conn:
        query = sa.text("SELECT count(*) FROM code_index_files WHERE rowid > :r")
        return int(conn.execute(query, {"r": rowid}).scalar_one())
