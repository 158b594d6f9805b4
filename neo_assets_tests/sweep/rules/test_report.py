"""The per-repo sweep document (CONTRACT.md, "sweep"): its shapes, from a typed report."""

import pytest

from neo_assets.core import codes
from neo_assets.sweep.rules.report import EMPTY_CENSUS, SweepReport
from neo_assets.sweep.rules.summary import SweepCounts, SweepTimings

CONTRACT_KEYS = {"tenantId", "repoSlug", "outcome", "revision", "counts", "deferredCauseCode"}


def test_a_swept_repo_carries_the_contract_keys_and_its_census() -> None:
    poison = {"count": 1, "ids": ["a" * 64]}
    report = SweepReport(
        tenant_id="acme",
        repo_slug="widgets",
        outcome=codes.OUTCOME_DEFERRED,
        revision="r1",
        counts=SweepCounts(embedded=2, offered=3, deferred=1, chunks=5, already_present=3),
        deferred_cause_code=codes.KB_VECTOR_EMBED_TIMEOUT,
        consecutive_failures=2,
        next_due_at=1_700_000_000.0,
        content_poison_chunks=poison,
        strikes=({"chunkId": "b" * 64, "kind": "timeout", "strikes": 1, "threshold": 2},),
        embedding_generation="g1",
        timings=SweepTimings(stages_s=1.25),
        notices=("raise the band",),
        lease={"held": True},
    )
    doc = report.to_doc()
    assert CONTRACT_KEYS <= set(doc)
    assert doc["counts"]["chunks"] == 5 and doc["counts"]["alreadyPresent"] == 3
    assert doc["contentPoisonChunks"] == poison
    assert doc["undeliverableChunks"] == dict(EMPTY_CENSUS)
    assert doc["strikes"][0]["kind"] == "timeout"
    assert (doc["consecutiveFailures"], doc["nextDueAt"]) == (2, 1_700_000_000.0)
    assert doc["embeddingGeneration"] == "g1" and doc["timings"] == {"stagesSeconds": 1.25}
    assert doc["notices"] == ["raise the band"] and doc["lease"] == {"held": True}
    assert "errors" not in doc  # the lane's rows stay in the ledger's last_summary


def test_a_skipped_repo_says_only_who_holds_the_lease() -> None:
    doc = SweepReport(
        tenant_id="acme",
        repo_slug="widgets",
        outcome=codes.OUTCOME_SKIPPED,
        revision=None,
        deferred_cause_code="SWEEP_LEASE_HELD",
        lease={"otherHolder": "run-1"},
    ).to_doc()
    assert set(doc) == CONTRACT_KEYS | {"lease"}
    assert doc["counts"] == {} and doc["lease"] == {"otherHolder": "run-1"}


def test_a_sweep_deferred_before_its_lane_names_its_row() -> None:
    row = {"code": "KB_VECTOR_EMBED_CONNECTION_REFUSED", "message": "down", "details": {}}
    doc = SweepReport(
        tenant_id="acme",
        repo_slug="widgets",
        outcome=codes.OUTCOME_DEFERRED,
        revision="r1",
        deferred_cause_code=row["code"],
        errors=(row,),
    ).to_doc()
    assert doc["counts"] == {} and doc["errors"] == [row] and "lease" not in doc


def test_a_report_is_frozen() -> None:
    report = SweepReport("acme", "widgets", codes.OUTCOME_COMPLETE, "r1")
    with pytest.raises(AttributeError):
        report.outcome = codes.OUTCOME_FAILED  # type: ignore[misc]
