"""Stage 4 of a sweep: the census, the secret fences, and the switch to the new generation."""

from collections.abc import Mapping
from typing import Any

from neo_assets.code_tools.index_store import reclaim_indexes
from neo_assets.config.settings import Settings
from neo_assets.core import codes
from neo_assets.generations.records import record_repo_generation
from neo_assets.quality.parser_switch import settle_repo
from neo_assets.secrets.rules import secret_locations
from neo_assets.store.ledger import Ledger
from neo_assets.sweep.context import RepoContext
from neo_assets.sweep.envelope import EnvelopeResult
from neo_assets.sweep.failures import _json, backoff_due_at
from neo_assets.sweep.rules.censuses import build_censuses, encode_census
from neo_assets.sweep.rules.outcomes import classify_sweep_outcome
from neo_assets.sweep.rules.report import SweepReport, cause_message
from neo_assets.sweep.rules.summary import LaneSummary


def census_step(
    ctx: RepoContext,
    settings: Settings,
    ledger: Ledger,
    envelope: EnvelopeResult,
    summary: LaneSummary,
    now: float,
) -> SweepReport:
    """Classify the sweep, move the checkpoint, persist both censuses in one transaction."""
    verdict = classify_sweep_outcome(summary.errors)
    previous = ledger.repo_state(ctx.tenant_id, ctx.repo_slug) or {}
    failures = 0 if verdict.reset_failures else int(previous.get("consecutive_failures") or 0) + 1
    censuses = build_censuses(verdict.fence_rows)
    complete = verdict.outcome == codes.OUTCOME_COMPLETE
    next_due = None if complete else backoff_due_at(ctx, settings, failures, now)
    episode = previous.get("recovery_episode_opened_at")
    if complete:
        episode = None
    elif verdict.arms_recovery_episode and episode is None:
        episode = now
    state = {
        "last_outcome": verdict.outcome,
        "deferred_cause_code": verdict.cause_code,
        "consecutive_failures": failures,
        "last_attempt_at": now,
        "last_attempted_rev": envelope.revision,
        "declaration_digest": envelope.repo_declaration_digest,
        "embedding_generation": summary.generation,
        "attempt_inputs_at": now,  # the three above are this attempt's own
        "next_due_at": next_due,
        "recovery_episode_opened_at": episode,
        "content_poison_census": encode_census(censuses["contentPoisonChunks"]),
        "undeliverable_census": encode_census(censuses["undeliverableChunks"]),
        "secret_census": encode_census(censuses["secretChunks"]),
        "last_summary": _json(summary.to_doc()),
        "updated_at": now,
    }
    if verdict.advance_checkpoint:
        state["last_ingested_rev"] = envelope.revision
    ledger.record_sweep_result(ctx.tenant_id, ctx.repo_slug, state=state)
    # The code index follows the checkpoint: kept at the revision served and the one this
    # sweep declared (served once complete), reclaimed at any other.
    served = state.get("last_ingested_rev", previous.get("last_ingested_rev"))
    reclaim_indexes(ledger, ctx.tenant_id, ctx.repo_slug, {envelope.revision, served})
    if summary.generation:
        counts = summary.counts
        record_repo_generation(
            ledger,
            ctx.tenant_id,
            ctx.repo_slug,
            summary.generation,
            complete=complete,
            chunks=counts.chunks,
            present=(counts.already_present or 0) + counts.embedded,
            now=now,
        )
    settle_repo(settings, ledger, ctx.tenant, ctx.repo_slug)
    return SweepReport(
        tenant_id=ctx.tenant_id,
        repo_slug=ctx.repo_slug,
        outcome=verdict.outcome,
        revision=envelope.revision,
        counts=summary.counts,
        deferred_cause_code=verdict.cause_code,
        consecutive_failures=failures,
        next_due_at=next_due,
        content_poison_chunks=censuses["contentPoisonChunks"],
        undeliverable_chunks=censuses["undeliverableChunks"],
        secret_chunks=with_locations(censuses["secretChunks"], verdict.fence_rows),
        strikes=summary.strikes,
        embedding_generation=summary.generation,
        timings=summary.timings,
        notices=summary.notices,
        error=cause_message(summary.errors, verdict.cause_code)
        if verdict.cause_code == codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE
        else None,
    )


def with_locations(census: Mapping[str, Any], fence_rows: tuple[Any, ...]) -> dict[str, Any]:
    """The secret census with where each secret is (path, line, rule; never the secret)."""
    receipts = [
        (row["details"]["chunkId"], row["details"].get("receipt"))
        for row in fence_rows
        if row["details"]["disposition"] == codes.DISPOSITION_SECRET
    ]
    return {**census, "locations": secret_locations(receipts)}
