"""What a sweep that did not finish records: its failure, its back-off, the unfinished attempt."""

import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, NamedTuple

from neo_assets.config.settings import Settings
from neo_assets.core import codes
from neo_assets.core.ids.config_digest import repo_declaration_digest
from neo_assets.generations.serving import configured_generation
from neo_assets.store.ledger import Ledger
from neo_assets.sweep.context import RepoContext
from neo_assets.sweep.envelope import EnvelopeResult
from neo_assets.sweep.rules.censuses import decode_census
from neo_assets.sweep.rules.report import EMPTY_CENSUS, SweepReport
from neo_assets.sweep.rules.scheduling import next_due_at, stable_jitter_seconds
from neo_assets.sweep.rules.summary import LaneSummary


def backoff_due_at(ctx: RepoContext, settings: Settings, failures: int, now: float) -> float:
    """When a repo that did not complete is due again: its cadence, backed off by its
    consecutive failures, capped, with the repo's stable jitter."""
    cadence_s = 60.0 * (ctx.repo.cadence_minutes or settings.sweep.default_cadence_minutes)
    return next_due_at(
        now,
        cadence_s,
        failures,
        60.0 * settings.sweep.backoff_cap_minutes,
        stable_jitter_seconds(ctx.key, settings.sweep.backoff_jitter_s),
    )


def record_failed_sweep(
    ctx: RepoContext,
    settings: Settings,
    ledger: Ledger,
    code: str,
    message: str,
    now: float,
    envelope: EnvelopeResult | None = None,
) -> None:
    """A sweep that raised still counts: failed, one more consecutive failure, backoff, and the
    inputs the attempt was made with (revision, declaration digest, generation), which the
    due rule compares. Checkpoint and censuses stay. Design: docs/design/sweep.md#outcomes"""
    revision: str | None = None
    if envelope is not None:
        revision = envelope.revision
    else:
        with suppress(Exception):  # unreadable in any way: seen as None, still recorded
            revision = ctx.revision(settings)
    record_unfinished_attempt(
        ctx,
        settings,
        ledger,
        outcome=codes.OUTCOME_FAILED,
        code=code,
        revision=revision,
        summary=LaneSummary(errors=({"code": code, "message": message[:500]},)),
        now=now,
    )


class UnfinishedAttempt(NamedTuple):
    previous: dict[str, Any]  # the repo's state before this attempt
    failures: int
    next_due: float
    generation: str


def record_unfinished_attempt(
    ctx: RepoContext,
    settings: Settings,
    ledger: Ledger,
    *,
    outcome: str,
    code: str,
    revision: str | None,
    summary: LaneSummary,
    now: float,
    arms_recovery_episode: bool = False,
) -> UnfinishedAttempt:
    """An attempt that ended before its census (failed, or deferred before the lane): one
    more consecutive failure, its backoff, and what the attempt was made with (revision,
    declaration digest, the settings' generation, ``attempt_inputs_at``), which the due
    rule compares with. The checkpoint and the censuses are left as they were."""
    previous = ledger.repo_state(ctx.tenant_id, ctx.repo_slug) or {}
    failures = int(previous.get("consecutive_failures") or 0) + 1
    next_due = backoff_due_at(ctx, settings, failures, now)
    generation = configured_generation(settings)
    state = {
        "last_outcome": outcome,
        "deferred_cause_code": code,
        "consecutive_failures": failures,
        "last_attempt_at": now,
        "last_attempted_rev": revision,
        "declaration_digest": repo_declaration_digest(ctx.repo.to_plain()),
        "embedding_generation": generation,
        "attempt_inputs_at": now,
        "next_due_at": next_due,
        "last_summary": _json(summary.to_doc()),
        "updated_at": now,
    }
    if arms_recovery_episode:
        state["recovery_episode_opened_at"] = previous.get("recovery_episode_opened_at") or now
    ledger.record_sweep_result(ctx.tenant_id, ctx.repo_slug, state=state)
    return UnfinishedAttempt(previous, failures, next_due, generation)


def record_deferred_before_lane(
    ctx: RepoContext,
    settings: Settings,
    ledger: Ledger,
    envelope: EnvelopeResult,
    code: str,
    message: str,
    now: float,
) -> SweepReport:
    """A sweep that cannot go on before its lane (the server that counts tokens is unreachable):
    deferred with ``code``, backoff, a recovery episode armed; checkpoint and censuses stay."""
    row = {"code": code, "message": message[:500], "details": {"stage": "chunk_generation"}}
    done = record_unfinished_attempt(
        ctx,
        settings,
        ledger,
        outcome=codes.OUTCOME_DEFERRED,
        code=code,
        revision=envelope.revision,
        summary=LaneSummary(errors=(row,), generation=configured_generation(settings)),
        now=now,
        arms_recovery_episode=True,
    )
    return SweepReport(
        tenant_id=ctx.tenant_id,
        repo_slug=ctx.repo_slug,
        outcome=codes.OUTCOME_DEFERRED,
        revision=envelope.revision,
        deferred_cause_code=code,
        consecutive_failures=done.failures,
        next_due_at=done.next_due,
        content_poison_chunks=_census_or_empty(done.previous.get("content_poison_census")),
        undeliverable_chunks=_census_or_empty(done.previous.get("undeliverable_census")),
        secret_chunks=_census_or_empty(done.previous.get("secret_census")),
        embedding_generation=done.generation,
        errors=(row,),
        error=message if code == codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE else None,
    )


def _census_or_empty(raw: object) -> Mapping[str, Any]:
    census = decode_census(raw)
    return census if census is not None else EMPTY_CENSUS


@contextmanager
def failure_recorded(
    ctx: RepoContext,
    settings: Settings,
    ledger: Ledger,
    default_code: str,
    envelope: EnvelopeResult | None = None,
) -> Iterator[None]:
    """Record a step's exception as a failed sweep (its own code when it carries one,
    else ``default_code``; attempted at ``envelope``'s revision when the envelope was
    listed), then let it propagate so the run fails visibly too."""
    try:
        yield
    except Exception as exc:
        code = getattr(exc, "code", None)
        if not isinstance(code, str) or not code.isupper():
            code = default_code
        try:
            record_failed_sweep(ctx, settings, ledger, code, str(exc), time.time(), envelope)
        except Exception:  # noqa: BLE001 - the ledger may be what failed; keep the cause
            pass
        raise


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)
