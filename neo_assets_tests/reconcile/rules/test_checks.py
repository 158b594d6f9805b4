"""The rules behind reconciliation's checks: no hole, tenant containment, residue."""

from typing import Any

import pytest

from neo_assets.reconcile.rules.checks import (
    CONTAINMENT_UNDECLARED_TENANT,
    CONTAINMENT_UNOWNED_REPO,
    CONTAINMENT_UNSTAMPED_TENANT,
    UNSTAMPED_TENANT,
    containment,
    count_by_tenant,
    foreign_count,
    path_wholeness,
    residue,
    residue_share,
    row_ids_by_path,
)
from neo_assets.reconcile.rules.declaration import RepoDeclaration, TenantDeclaration

REPO = RepoDeclaration(
    repo_slug="widgets",
    parser_id="neo-code",
    parser_version="1.1.0",
    envelope_paths=frozenset({"a.py", "b.py", "c.py", "d.py", "e.py", "vendor/x.py"}),
    yielded_paths=frozenset({"a.py", "b.py", "c.py", "d.py", "e.py"}),
    envelope_recorded_at=100.0,
    declared_ids_by_path={
        "a.py": frozenset({"a1", "a2"}),
        "b.py": frozenset({"b1", "b2"}),
        "c.py": frozenset({"c1"}),
        "d.py": frozenset({"d1"}),
        "e.py": frozenset(),  # yields no chunk now: complete vacuously
    },
    has_complete_envelope=True,
)


def test_wholeness_sorts_every_yielded_path() -> None:
    rows_by_path = {
        "a.py": {"a1", "a2"},  # complete
        "b.py": {"b1", "b-old"},  # incomplete, held by the earlier generation
        "c.py": set(),  # nothing holds it
        "d.py": {"d-old"},  # d1 is fenced: complete, earlier rows or not
        "vendor/x.py": {"v-old"},  # not yielded: no set to keep
    }
    present = {"a1", "a2", "b1", "b-old", "d-old", "v-old"}
    unsettled = path_wholeness(REPO, rows_by_path, present, {"d1"}, settled=False)
    assert unsettled.complete == 3  # a, d (fenced), e (empty)
    assert unsettled.held == ("widgets:b.py",)
    assert unsettled.in_flight == ("widgets:c.py",) and unsettled.holes == ()
    # Once the sweep completed, a path nothing holds lost what the sweep wrote.
    settled = path_wholeness(REPO, rows_by_path, present, {"d1"}, settled=True)
    assert settled.holes == ("widgets:c.py",) and settled.in_flight == ()
    assert settled.held == ("widgets:b.py",)


def test_a_path_this_reconciliation_thinned_must_be_complete() -> None:
    # Earlier rows of b.py remain, but some were deleted while b2 is missing: a hole.
    judged = path_wholeness(
        REPO,
        {"b.py": {"b1", "b-old"}},
        {"a1", "a2", "b1", "b-old", "c1", "d1"},
        set(),
        settled=False,
        reclaimed_paths={"b.py", "a.py"},
    )
    assert judged.holes == ("widgets:b.py",)  # a.py is complete: reclaiming it was fine
    assert judged.complete == 4


def test_a_deleted_replacement_in_a_settled_repo_is_a_hole() -> None:
    present = {"a1", "b1", "b2", "c1", "d1"}  # a2 deleted after the sweep wrote it
    judged = path_wholeness(REPO, {"a.py": {"a1"}}, present, set(), settled=True)
    assert judged.holes == ("widgets:a.py",)
    # The control: the same repo with a2 present has no hole.
    healthy = path_wholeness(REPO, {"a.py": {"a1", "a2"}}, present | {"a2"}, set(), settled=True)
    assert healthy.holes == () and healthy.complete == 5


def test_a_repo_without_authority_is_not_judged() -> None:
    blind = RepoDeclaration(
        repo_slug="widgets",
        parser_id="neo-code",
        parser_version="1.1.0",
        envelope_paths=frozenset(),
        yielded_paths=frozenset(),
        envelope_recorded_at=0.0,
        declared_ids_by_path={},
        has_complete_envelope=False,
    )
    judged = path_wholeness(blind, {}, set(), set(), settled=True)
    assert (judged.complete, judged.held, judged.in_flight, judged.holes) == (0, (), (), ())


def md(tenant: Any = "acme", repo: Any = "widgets", path: Any = "a.py", **more: Any) -> dict:
    return {"tenantId": tenant, "repoSlug": repo, "sourcePath": path, **more}


def test_row_ids_by_path_takes_this_tenants_rows_of_this_repo_only() -> None:
    rows = [
        {"id": "1", "metadata": md()},
        {"id": "2", "metadata": md(path="b.py")},
        {"id": "3", "metadata": md(tenant="globex")},
        {"id": "4", "metadata": md(repo="other")},
        {"id": "5", "metadata": md(path=None)},
        {"id": 6, "metadata": md()},
        {"id": "7", "metadata": None},
    ]
    assert row_ids_by_path(rows, "acme", "widgets") == {"a.py": {"1"}, "b.py": {"2"}}


def test_containment_counts_every_row_per_tenant_and_names_each_violation() -> None:
    owners = {"acme": {"widgets"}, "globex": {"tools"}}
    rows = [
        {"id": "ok-a", "metadata": md()},
        {"id": "ok-g", "metadata": md("globex", "tools")},
        {"id": "intruder", "metadata": md("intruder", "tools")},
        {"id": "cross", "metadata": md("acme", "tools")},  # acme does not own tools
        {"id": "no-repo", "metadata": md("acme", None)},
        {"id": "no-tenant", "metadata": {"repoSlug": "widgets"}},
        {"id": "bad-id", "metadata": md("ACME!")},
        {"id": "empty", "metadata": md("")},
        {"id": "not-a-mapping", "metadata": None},
    ]
    judged = containment(rows, owners, examples=10)
    assert judged.rows_by_tenant == {
        UNSTAMPED_TENANT: 3,
        "ACME!": 1,
        "acme": 3,
        "globex": 1,
        "intruder": 1,
    }
    assert judged.violations == {
        CONTAINMENT_UNSTAMPED_TENANT: 4,
        CONTAINMENT_UNDECLARED_TENANT: 1,
        CONTAINMENT_UNOWNED_REPO: 2,
    }
    assert judged.examples[CONTAINMENT_UNOWNED_REPO] == ("cross", "no-repo")
    assert judged.examples[CONTAINMENT_UNDECLARED_TENANT] == ("intruder",)
    assert judged.violating_rows == 7
    assert containment(rows[:2], owners).violating_rows == 0


def test_containment_examples_are_bounded_but_counts_are_not() -> None:
    rows = [{"id": f"x{i:03d}", "metadata": md("intruder")} for i in range(50)]
    judged = containment(rows, {"acme": {"widgets"}}, examples=5)
    assert judged.violations[CONTAINMENT_UNDECLARED_TENANT] == 50
    assert judged.examples[CONTAINMENT_UNDECLARED_TENANT] == tuple(f"x{i:03d}" for i in range(5))


def test_plan_rows_are_counted_per_tenant_from_what_was_read() -> None:
    counts = count_by_tenant([md(), md(), md("globex"), {"repoSlug": "x"}, None])
    assert counts == {UNSTAMPED_TENANT: 1, "acme": 2, "globex": 1}  # None: the row is gone
    assert foreign_count("acme", counts) == 2
    assert foreign_count("acme", {"acme": 5}) == 0


def test_residue_breaks_the_share_down_by_repo_and_pair() -> None:
    tenant = TenantDeclaration("acme", 2, {"widgets": REPO})

    def r(rid: str, version: Any, repo: str = "widgets", tenant_id: str = "acme") -> dict:
        return {
            "id": rid,
            "metadata": md(tenant_id, repo, parserId="neo-code", parserVersion=version),
        }

    rows = [
        r("n1", "1.1.0"),
        r("n2", "1.1.0"),
        r("o1", "1.0.0"),
        r("o2", "0.9.0"),
        r("gone", "1.1.0", repo="retired"),  # an undeclared repo's rows are residue
        r("foreign", "1.0.0", tenant_id="globex"),  # not counted at all
        r("unstamped", None),  # no parser version: not counted
    ]
    found = residue(tenant, rows, examples=2)
    assert found.share == pytest.approx(residue_share(tenant, rows)) == pytest.approx(3 / 5)
    assert (found.residue_rows, found.stamped_rows) == (3, 5)
    assert found.by_pair == {
        "retired neo-code@1.1.0": 1,
        "widgets neo-code@0.9.0": 1,
        "widgets neo-code@1.0.0": 1,
    }
    assert found.examples == ("gone", "o1")
    assert residue(tenant, rows[:2]).share == 0.0
