"""A repo's scheduling state read from its ledger row, and the retry policy from the
settings: what the due check (``sweep.due``) and the status snapshot both read."""

from typing import Any

from neo_assets.config.settings import Settings
from neo_assets.sweep.rules.scheduling import RepoState, RetryPolicy


def repo_state_from_row(row: dict[str, Any] | None) -> RepoState | None:
    """The scheduling view of a ledger row (None when the repo was never swept)."""
    if row is None:
        return None
    return RepoState(
        last_outcome=row.get("last_outcome"),
        last_ingested_rev=row.get("last_ingested_rev"),
        last_attempted_rev=row.get("last_attempted_rev"),
        declaration_digest=row.get("declaration_digest"),
        embedding_generation=row.get("embedding_generation"),
        consecutive_failures=row.get("consecutive_failures"),
        last_attempt_at=row.get("last_attempt_at"),
        recovery_episode_opened_at=row.get("recovery_episode_opened_at"),
        attempt_inputs_at=row.get("attempt_inputs_at"),
    )


def retry_policy(settings: Settings) -> RetryPolicy:
    return RetryPolicy(
        cap_seconds=60.0 * settings.sweep.backoff_cap_minutes,
        max_jitter_seconds=settings.sweep.backoff_jitter_s,
    )
