"""A repo's scheduling state read from its ledger row, and the retry policy from the
settings: what the due check (``sweep.due``) and the status snapshot both read."""

from dataclasses import fields
from typing import Any

from neo_assets.config.settings import Settings
from neo_assets.sweep.rules.scheduling import RepoState, RetryPolicy


def repo_state_from_row(row: dict[str, Any] | None) -> RepoState | None:
    """The scheduling view of a ledger row (None when the repo was never swept)."""
    if row is None:
        return None
    # The state's fields are the ledger's columns, one for one.
    return RepoState(**{column.name: row.get(column.name) for column in fields(RepoState)})


def retry_policy(settings: Settings) -> RetryPolicy:
    return RetryPolicy(
        cap_seconds=60.0 * settings.sweep.backoff_cap_minutes,
        max_jitter_seconds=settings.sweep.backoff_jitter_s,
    )
