"""Which declared repos are due now, and the run key that makes a request idempotent."""

from dataclasses import dataclass

from neo_assets.config.settings import Settings
from neo_assets.core import codes
from neo_assets.core.ids.config_digest import repo_declaration_digest
from neo_assets.core.ids.partition_keys import partition_key
from neo_assets.generations.serving import configured_generation
from neo_assets.health import records as health_store
from neo_assets.health.rules.freeze import released_by_lift
from neo_assets.store.ledger import Ledger
from neo_assets.sweep.context import RepoContext
from neo_assets.sweep.repo_state import repo_state_from_row, retry_policy
from neo_assets.sweep.rules.scheduling import (
    DUE_RECOVERY_HEALTHY,
    Observed,
    due_reason,
    retry_due_at,
    unreadable_source_reason,
)
from neo_assets.sweep.rules.summary import read_stored_summary
from neo_assets.tenants.validation import TenantsFile

DUE_FORCED = "forced"


@dataclass(frozen=True)
class LastFailure:
    """The repo's last sweep failed: why (its code and the first line of its error, None
    when not recorded) and when the backoff lets it be retried (None: not known)."""

    cause: str | None
    error: str | None
    retry_at: float | None


@dataclass(frozen=True)
class DueRepo:
    ctx: RepoContext
    reason: str | None  # None: not due
    revision: str | None
    run_key: str
    # Set when the last sweep failed (due or not), so a caller can say so.
    last_failure: LastFailure | None = None
    # When the backoff lets a deferred or failed repo be retried (None: not retrying).
    retry_at: float | None = None

    @property
    def key(self) -> str:
        return self.ctx.key


def declared_repos(
    tenants: TenantsFile, tenant: str | None = None, repo: str | None = None
) -> list[RepoContext]:
    return [
        RepoContext(tenant=t, repo=r)
        for t in tenants.tenants
        if tenant is None or t.id == tenant
        for r in t.repos
        if repo is None or r.slug == repo
    ]


def evaluate(
    ctxs: list[RepoContext], settings: Settings, ledger: Ledger, now: float, *, force: bool = False
) -> list[DueRepo]:
    generation = configured_generation(settings)
    # Read once per evaluation (a ledger read, never a probe): the canary's latest healthy
    # sighting ends recovery episodes; a lifted freeze releases repos it deferred.
    healthy_at = health_store.latest_healthy_at(ledger)
    freeze = health_store.freeze_record(ledger, settings.store.collection_name)
    policy = retry_policy(settings)
    out = []
    for ctx in ctxs:
        revision = ctx.revision(settings)
        decl = repo_declaration_digest(ctx.repo.to_plain())
        row = ledger.repo_state(ctx.tenant_id, ctx.repo_slug)
        cadence_s = 60.0 * (ctx.repo.cadence_minutes or settings.sweep.default_cadence_minutes)
        observed = Observed(
            repo_key=partition_key(ctx.tenant_id, ctx.repo_slug),
            cadence_seconds=cadence_s,
            current_revision=revision,
            declaration_digest=decl,
            embedding_generation=generation,
            recovery_healthy_at=healthy_at,
        )
        state = repo_state_from_row(row)
        retry_at = retry_due_at(state, observed, policy)
        reason = DUE_FORCED if force else due_reason(state, observed, now, policy)
        if reason is None and released_by_lift(
            (row or {}).get("last_outcome"),
            (row or {}).get("deferred_cause_code"),
            (row or {}).get("last_attempt_at"),
            freeze,
        ):
            reason = DUE_RECOVERY_HEALTHY
        if reason is None and revision is None:
            reason = unreadable_source_reason(state)
        failures = int((row or {}).get("consecutive_failures") or 0)
        run_key = f"{ctx.key}@{revision}:{decl[:12]}:{generation[:12]}:{failures}"
        last_failure = None
        if row is not None and row.get("last_outcome") == codes.OUTCOME_FAILED:
            last_failure = LastFailure(
                cause=row.get("deferred_cause_code") or None,
                error=read_stored_summary(row.get("last_summary")).first_error_line(),
                retry_at=retry_at,
            )
        out.append(
            DueRepo(
                ctx=ctx,
                reason=reason,
                revision=revision,
                run_key=run_key,
                last_failure=last_failure,
                retry_at=retry_at,
            )
        )
    return out
