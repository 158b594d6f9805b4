"""Read-side truth on real Chroma after real sweeps (reclamation off): a one-line edit, a
parser bump at partial progress and a retired repo. Each query answers with exactly one
complete set per path, judged against the no-hole check's own notion of completeness
(``reconcile.rules.checks.path_wholeness``): a complete path serves its declared ids, a
path held by an earlier generation serves that earlier set, nothing else is served.

Partial progress is real: the fault server hangs the request of a chunk whose text holds
the ``hang`` marker past the call ceiling, so that chunk stays deferred.
"""

import asyncio
from typing import Any

import numpy as np
import pytest

from neo_assets.config.settings import load_settings
from neo_assets.query.rules.request import QueryInputError, SearchRequest
from neo_assets.query.search import QueryService
from neo_assets.query.serving import Resident, serving_targets
from neo_assets.reconcile.reading import read_snapshot
from neo_assets.reconcile.rules.checks import path_wholeness, row_ids_by_path
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.fakes.fault_server import marker
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor
from neo_assets_tests.reconcile.test_reconciliation import (  # noqa: F401 - fixtures
    make_world,
    server,
    server_module,
)
from neo_assets_tests.sweep_harness import sweep_env_vars, text_file

OLD, NEW = "1.0.0", "1.1.0"
APP_V1 = "def alpha_helper(x):\n    return x + 1\n\n\ndef beta_helper(y):\n    return y * 2\n"
APP_V2 = (
    "def alpha_helper(x):\n    return x + 1\n\n\n"
    f"def beta_helper(y):\n    # {marker('hang')}\n    return y * 3\n"
)
APP_V2_FAST = (
    "def alpha_helper(x):\n    return x + 1\n\n\n"
    "def beta_helper(y):\n    # edited once\n    return y * 3\n"
)


@pytest.fixture
def env(
    server: FaultServerSupervisor,  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> FaultServerSupervisor:
    for name, value in sweep_env_vars(server).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("NEO_EMBEDDING_RECOVERY_MAX_WAIT_S", "0.3")
    monkeypatch.setenv("NEO_RECONCILIATION_ENABLED", "false")
    monkeypatch.setenv("NEO_SERVE_TRUTH_RECHECK_S", "0")
    return server


def service(world: Any) -> QueryService:
    return QueryService(Resident(load_settings(), world.store, world.ledger))


def served_by_path(svc: QueryService, world: Any, tenant: str, repo: str) -> dict[str, set[str]]:
    target_rows = world.rows(tenant, repo)
    # The served set itself is what is judged.
    view = svc._view(serving_targets(svc.resident, tenant).first, tenant)  # noqa: SLF001
    out: dict[str, set[str]] = {}
    for rid in view.ids:
        md = target_rows.get(rid)
        if md is not None:
            out.setdefault(md["sourcePath"], set()).add(rid)
    return out


def judge(world: Any, tenant: str, repo: str, previous: dict[str, set[str]]) -> dict[str, str]:
    """Each yielded path's state by the no-hole check, and that the served set is the one
    that state names: complete -> the declared ids, held -> ``previous`` (the set the
    test saw complete before), in flight -> nothing."""
    settings = load_settings()
    snap = read_snapshot(
        settings, load_tenants(world.tenants_path), tenant, world.store, world.ledger
    )
    decl = snap.declaration.repos[repo]
    judged = path_wholeness(
        decl,
        row_ids_by_path(snap.rows, tenant, repo),
        snap.present,
        snap.fenced,
        settled=snap.settled(world.ledger, repo),
    )
    served = served_by_path(service(world), world, tenant, repo)
    states: dict[str, str] = {}
    for path in decl.yielded_paths:
        label = f"{repo}:{path}"
        got = served.get(path, set())
        if label in judged.held:
            states[path] = "held"
            assert got == previous[path], (path, got, previous[path])
        elif label in judged.in_flight or label in judged.holes:
            states[path] = "nothing"
            assert got == set(), path
        else:
            states[path] = "complete"
            assert got == set(decl.declared_ids_by_path[path]), path
    assert set(served) <= set(decl.yielded_paths)  # nothing of a path not yielded
    return states


def search(world: Any, text: str, **kw: Any) -> list[dict[str, Any]]:
    return asyncio.run(service(world).search("acme", SearchRequest(query=text, k=50, **kw)))[
        "results"
    ]


def declared(world: Any, tenant: str, repo: str) -> dict[str, set[str]]:
    return world.declared(tenant, repo)


def test_one_line_edit_serves_the_old_set_until_the_new_one_is_complete(
    make_world: Any,  # noqa: F811 - the fixture imported above
    env: FaultServerSupervisor,
) -> None:
    env.configure(hang_s=0)
    world = make_world({"widgets": {"app.py": APP_V1, "notes.txt": text_file("plain notes")}})
    world.declare({"acme": [world.entry("widgets")]})
    assert world.sweep() == {("acme", "widgets"): "complete"}
    rev1 = declared(world, "acme", "widgets")
    assert len(rev1["app.py"]) == 2
    assert judge(world, "acme", "widgets", {}) == {"app.py": "complete", "notes.txt": "complete"}

    # A one-line edit of beta_helper whose new chunk cannot be embedded yet.
    world.repos["widgets"].write("app.py", APP_V2)
    world.repos["widgets"].commit("edit beta", when=1_700_000_100)
    env.configure(hang_s=4)
    assert world.sweep(force=True) == {("acme", "widgets"): "deferred"}
    env.configure(hang_s=0)
    rows = world.rows("acme", "widgets")
    new_ids = declared(world, "acme", "widgets")["app.py"]
    assert not new_ids <= set(rows)  # partial: the edited chunk is missing
    assert judge(world, "acme", "widgets", rev1) == {"app.py": "held", "notes.txt": "complete"}
    hits = [h for h in search(world, "beta_helper") if h["path"] == "app.py"]
    assert {h["id"] for h in hits} == rev1["app.py"]  # the whole old set, once each

    # The edit lands complete: the new set alone is served, the superseded row is still
    # in the collection (reclamation is off) and is never returned beside it.
    world.repos["widgets"].write("app.py", APP_V2_FAST)
    world.repos["widgets"].commit("edit beta again", when=1_700_000_200)
    assert world.sweep(force=True) == {("acme", "widgets"): "complete"}
    rev3 = declared(world, "acme", "widgets")
    rows = world.rows("acme", "widgets")
    assert rev1["app.py"] - rev3["app.py"] <= set(rows)  # superseded rows still there
    assert judge(world, "acme", "widgets", rev1) == {"app.py": "complete", "notes.txt": "complete"}
    hits = [h for h in search(world, "beta_helper") if h["path"] == "app.py"]
    assert {h["id"] for h in hits} == rev3["app.py"]
    assert sorted(h["name"] for h in hits) == ["alpha_helper", "beta_helper"]

    # A row of another embedding generation, otherwise a perfect match, is never served.
    some = next(iter(rev3["app.py"]))
    md = {**rows[some], "embeddingGeneration": "another-generation"}
    dims = len(world.store.collection.get(ids=[some], include=["embeddings"])["embeddings"][0])
    vector = np.ones((1, dims), dtype=np.float32)
    world.store.add(["f" * 64], vector, ["def beta_helper(y): return y"], [md])
    assert "f" * 64 not in {h["id"] for h in search(world, "beta_helper")}


def test_parser_bump_at_partial_progress_serves_one_parser_per_path(
    make_world: Any,  # noqa: F811 - the fixture imported above
    env: FaultServerSupervisor,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The bump must send its texts (unchanged inputs are otherwise copied, never sent),
    # so the hanging chunk leaves the new parser's generation partial.
    monkeypatch.setenv("NEO_EMBEDDING_REUSE_VECTORS", "false")
    # Path by path; with the quality gate on (the default) the old parser serves every
    # path until the new one is evaluated (quality/test_parser_gate_e2e.py).
    monkeypatch.setenv("NEO_QUALITY_GATE", "false")
    env.configure(hang_s=0)
    world = make_world(
        {
            "widgets": {
                "core.py": "class Widget:\n    def render(self):\n        return 'w'\n",
                "README.md": "# Widgets\n\n## Use\n\nCall render.\n",
                "slow.txt": text_file(f"a chunk whose request hangs {marker('hang')}"),
            }
        }
    )
    world.declare({"acme": [world.entry("widgets", version=OLD)]})
    assert world.sweep() == {("acme", "widgets"): "complete"}
    old = declared(world, "acme", "widgets")

    world.declare({"acme": [world.entry("widgets", version=NEW)]})
    env.configure(hang_s=4)
    assert world.sweep(force=True) == {("acme", "widgets"): "deferred"}
    env.configure(hang_s=0)
    states = judge(world, "acme", "widgets", old)
    assert states["slow.txt"] == "held" and "complete" in states.values()
    rows = world.rows("acme", "widgets")
    by_path: dict[str, set[str]] = {}
    for h in search(world, "render widgets use call hangs"):
        by_path.setdefault(h["path"], set()).add(rows[h["id"]]["parserVersion"])
    assert by_path and all(len(versions) == 1 for versions in by_path.values()), by_path
    assert by_path.get("slow.txt", {OLD}) == {OLD}
    assert by_path.get("core.py", {NEW}) == {NEW}


def test_retired_repo_is_never_served(
    make_world: Any,  # noqa: F811 - the fixture imported above
    env: FaultServerSupervisor,
) -> None:
    env.configure(hang_s=0)
    world = make_world(
        {
            "widgets": {"core.py": "def render_widget():\n    return 'w'\n"},
            "gadgets": {"gadget.py": "def retired_gadget_xyzzy():\n    return 'g'\n"},
        }
    )
    world.declare({"acme": [world.entry("widgets"), world.entry("gadgets")]})
    assert set(world.sweep().values()) == {"complete"}
    assert any(h["repo"] == "gadgets" for h in search(world, "retired_gadget_xyzzy"))

    # One long-lived service, as `serve` keeps: it notices the retirement by itself.
    live = service(world)
    ask = SearchRequest(query="retired_gadget_xyzzy", k=50)

    async def before_and_after() -> tuple[list[Any], list[Any], Any]:
        before = (await live.search("acme", ask))["results"]
        world.declare({"acme": [world.entry("widgets")]})  # gadgets removed from tenants.yaml
        after = (await live.search("acme", ask))["results"]
        try:
            await live.search("acme", SearchRequest(query="retired_gadget_xyzzy", repo="gadgets"))
        except QueryInputError as exc:
            refused = exc
        else:
            refused = None
        await live.resident.aclose()
        return before, after, refused

    before, after, refused = asyncio.run(before_and_after())
    assert any(h["repo"] == "gadgets" for h in before)
    assert world.rows("acme", "gadgets")  # its rows are still in the collection
    assert after and all(h["repo"] == "widgets" for h in after)
    assert refused is not None and refused.status == 403
    hits = search(world, "retired_gadget_xyzzy")  # a fresh reader agrees
    assert hits and all(h["repo"] == "widgets" for h in hits)
    listed = service(world).repos("acme", ())
    assert [r["repoSlug"] for r in listed["repos"]] == ["widgets"]
