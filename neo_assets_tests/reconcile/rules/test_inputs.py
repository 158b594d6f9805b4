"""Building the classifier's declaration from ledger records: when records speak for a
repo, and what they then declare."""

import math
from dataclasses import replace
from typing import Any

import pytest

from neo_assets.core import codes
from neo_assets.core.codes import (
    KIND_SUPERSEDED_PENDING,
    KIND_UNYIELDED_PATH,
    RECONCILE_DECLARATION_MOVED,
    RECONCILE_GENERATION_REVISION_MISMATCH,
    RECONCILE_NO_ENVELOPE,
    RECONCILE_NO_GENERATION,
    RECONCILE_RECORDS_INCONSISTENT,
)
from neo_assets.reconcile.rules.inputs import (
    RepoRecords,
    authority_problem,
    repo_declaration,
    sweep_settled,
    tenant_declaration,
)
from neo_assets.reconcile.rules.orphans import classify_orphans

DIGEST = "d" * 64
OTHER_DIGEST = "e" * 64
GOOD = RepoRecords(
    repo_slug="widgets",
    parser_id="neo-code",
    parser_version="1.1.0",
    declaration_digest=DIGEST,
    envelope_revision="r2",
    envelope_recorded_at=200.0,
    envelope_paths={"src/a.py": True, "src/empty.py": True, "vendor/lib.py": False},
    generation_revision="r2",
    generation_declaration_digest=DIGEST,
    declared_chunks=[("id-a1", "src/a.py"), ("id-a2", "src/a.py")],
)


def row(rid: str, path: str, version: str, ingested: float = 100.0) -> dict[str, Any]:
    return {
        "id": rid,
        "metadata": {
            "tenantId": "acme",
            "repoSlug": "widgets",
            "sourcePath": path,
            "parserId": "neo-code",
            "parserVersion": version,
            "tenantConfigVersion": 1,
            "ingestedAt": ingested,
        },
    }


def test_records_that_describe_the_declaration_now_are_an_authority() -> None:
    declared, problem = repo_declaration(GOOD)
    assert problem is None and authority_problem(GOOD) is None
    assert declared.has_complete_envelope
    assert declared.envelope_paths == {"src/a.py", "src/empty.py", "vendor/lib.py"}
    assert declared.yielded_paths == {"src/a.py", "src/empty.py"}
    assert declared.envelope_recorded_at == 200.0
    assert (declared.parser_id, declared.parser_version) == ("neo-code", "1.1.0")
    # A yielded path without a chunk is a recorded empty generation, not an unknown one.
    assert dict(declared.declared_ids_by_path) == {
        "src/a.py": frozenset({"id-a1", "id-a2"}),
        "src/empty.py": frozenset(),
    }


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"envelope_revision": None}, RECONCILE_NO_ENVELOPE),
        ({"envelope_recorded_at": None}, RECONCILE_NO_ENVELOPE),
        ({"generation_revision": None}, RECONCILE_NO_GENERATION),
        # A parse that failed after its envelope was recorded: an older generation.
        ({"generation_revision": "r1"}, RECONCILE_GENERATION_REVISION_MISMATCH),
        # The declaration moved (new exclude, parser bump) and no sweep parsed it yet.
        ({"generation_declaration_digest": OTHER_DIGEST}, RECONCILE_DECLARATION_MOVED),
        ({"declaration_digest": OTHER_DIGEST}, RECONCILE_DECLARATION_MOVED),
        ({"envelope_recorded_at": math.nan}, RECONCILE_RECORDS_INCONSISTENT),
        ({"envelope_recorded_at": math.inf}, RECONCILE_RECORDS_INCONSISTENT),
        # A declared chunk on a path the envelope does not yield: torn records.
        ({"declared_chunks": [("x", "vendor/lib.py")]}, RECONCILE_RECORDS_INCONSISTENT),
        ({"declared_chunks": [("x", "gone.py")]}, RECONCILE_RECORDS_INCONSISTENT),
    ],
)
def test_records_without_authority_declare_nothing_and_keep_every_row(
    change: dict[str, Any], problem: str
) -> None:
    records = replace(GOOD, **change)
    declared, found = repo_declaration(records)
    assert found == problem
    assert not declared.has_complete_envelope
    assert not declared.yielded_paths and not declared.declared_ids_by_path
    tenant, problems = tenant_declaration("acme", 3, [records])
    assert problems == {"widgets": problem}
    rows = [row("old-vendor", "vendor/lib.py", "1.0.0"), row("old-a", "src/a.py", "1.0.0")]
    plan = classify_orphans(tenant, rows, {"old-vendor", "old-a"}, set())
    assert plan.delete_ids == () and plan.pending_ids == ()
    assert plan.no_envelope == 2


def test_an_exclusion_is_acted_on_only_once_a_sweep_recorded_it() -> None:
    """The declaration excludes vendor/** now; until the sweep re-records the envelope and
    generation under that declaration, the vendor rows are kept. Then they are actionable
    at once, while the yielded path's superseded rows wait for their replacement."""
    rows = [row("old-vendor", "vendor/lib.py", "1.0.0"), row("old-a", "src/a.py", "1.0.0")]
    present = {"old-vendor", "old-a"}
    before = replace(GOOD, generation_declaration_digest=OTHER_DIGEST)
    tenant, _ = tenant_declaration("acme", 2, [before])
    assert classify_orphans(tenant, rows, present, set()).delete_ids == ()
    tenant, _ = tenant_declaration("acme", 2, [GOOD])
    plan = classify_orphans(tenant, rows, present, set())
    assert plan.ids_by_kind[KIND_UNYIELDED_PATH] == ("old-vendor",)
    assert plan.ids_by_kind[KIND_SUPERSEDED_PENDING] == ("old-a",)
    assert plan.delete_ids == ("old-vendor",)


@pytest.mark.parametrize(("version", "declared"), [(None, 0), (0, 0), (-1, 0), (4, 4)])
def test_an_unobserved_config_version_restamps_nothing(version: Any, declared: int) -> None:
    tenant, _ = tenant_declaration("acme", version, [GOOD])
    assert tenant.config_version == declared
    stale = row("id-a1", "src/a.py", "1.1.0")  # declared, tenantConfigVersion 1
    plan = classify_orphans(tenant, [stale], {"id-a1", "id-a2"}, set(), stale_gap=2)
    assert plan.restamp_ids == (() if declared < 3 else ("id-a1",))


SETTLED: dict[str, Any] = {
    "last_outcome": codes.OUTCOME_COMPLETE,
    "last_ingested_rev": "r2",
    "state_generation": "g",
    "state_declaration_digest": DIGEST,
    "envelope_revision": "r2",
    "generation_declaration_digest": DIGEST,
    "current_generation": "g",
    "complete_outcome": codes.OUTCOME_COMPLETE,
}


def test_a_sweep_is_settled_only_when_it_completed_at_this_envelope_and_geometry() -> None:
    assert sweep_settled(**SETTLED)


@pytest.mark.parametrize(
    "change",
    [
        {"last_outcome": codes.OUTCOME_DEFERRED},
        {"last_outcome": None},
        {"last_ingested_rev": "r1"},  # a sweep of a newer revision is under way
        {"envelope_revision": None},
        {"state_generation": "old"},  # the geometry changed since
        {"state_declaration_digest": OTHER_DIGEST},  # a parser bump is being parsed
        {"generation_declaration_digest": None},
    ],
)
def test_anything_in_flight_is_not_settled(change: dict[str, Any]) -> None:
    assert not sweep_settled(**{**SETTLED, **change})
