"""The operator's snapshot as words, and when it is refreshed (pure): ``repo_state_line``
says per repo what an operator needs to act; ``refresh_request`` materializes
``kb_status`` once per batch of finished sweep and reconciliation runs."""

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from neo_assets.core import codes
from neo_assets.sweep.rules.scheduling import (
    DUE_DECLARATION_MOVED,
    DUE_GENERATION_CHANGED,
    DUE_NEVER_SWEPT,
    DUE_REVISION_MOVED,
)

STATE_COMPLETE = "complete"
STATE_DEFERRED = "deferred"
STATE_FAILED = "failed"
STATE_RETIRED = "retired"
STATE_NEVER = "never swept"
STATE_MISDECLARED = "misdeclared"

# What to do about each failure code (a sweep fails only for these, see sweep/).
FAILURE_FIXES: Mapping[str, str] = {
    codes.SOURCE_REPO_MISSING: "fix the repo's `path` in tenants.yaml (it must exist)",
    codes.SOURCE_UNREADABLE: (
        "fix the repo's `ref:` or `path` in tenants.yaml (a branch, tag or commit that "
        "exists; a readable work tree)"
    ),
    codes.PARSE_FAILED: (
        "fix the repo's `parser:` in tenants.yaml (id, version, options) or the file named"
    ),
    codes.STORE_FAILED: "check the Chroma dir or server (NEO_CHROMA_URL) and the ledger",
    codes.KB_COLLECTION_FROZEN: "run the health canary; `neo-assets unfreeze` once healthy",
}
DEFAULT_FIX = "open the failed run from the Runs tab; fix what its first error names"
RUN_KEY_PREFIX = "status"


def failure_fix(code: str | None) -> str:
    return FAILURE_FIXES.get(code or "", DEFAULT_FIX)


def utc_text(epoch: float | None) -> str:
    if epoch is None:
        return "unknown"
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def repo_state_line(row: Mapping[str, Any]) -> tuple[str, str]:
    """(state, what to say) for one snapshot row (the status service's shape)."""
    if row.get("retired"):
        return STATE_RETIRED, (
            f"left tenants.yaml; {row.get('rows') or 0} rows wait for reclamation "
            "(NEO_RECONCILIATION_ENABLED=true reclaims them; re-declaring keeps them)"
        )
    misdeclared = row.get("misdeclared")
    if isinstance(misdeclared, Mapping):
        # What the tenants file gets wrong outranks the last sweep: it is the fix to make.
        held = misdeclared.get("inForce") == "last-good"
        stands = (
            "its last good declaration stays in force"
            if held
            else "not swept or served until fixed; none of its rows is retired"
        )
        last = row.get("outcome") or STATE_NEVER
        return STATE_MISDECLARED, (
            f"tenants.yaml line {misdeclared.get('line') or '?'}: "
            f"{misdeclared.get('message')}; {stands} (last sweep: {last}, "
            f"{row.get('rows') or 0} rows)"
        )
    outcome = row.get("outcome")
    if outcome == codes.OUTCOME_COMPLETE:
        return STATE_COMPLETE, f"{row.get('rows') or 0} rows"
    if outcome == codes.OUTCOME_DEFERRED:
        cause = row.get("deferredCauseCode")
        # A provider that is not there says where and what to do; a passing outage, its code.
        said = (
            f": {row['error']}"
            if cause == codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE and row.get("error")
            else ""
        )
        return STATE_DEFERRED, (
            f"{cause or 'cause unknown'}{said}; next try {utc_text(row.get('nextDueAt'))}"
        )
    if outcome == codes.OUTCOME_FAILED:
        cause = row.get("deferredCauseCode")
        error = str(row.get("error") or "no error recorded")
        if cause and error.startswith(f"{cause}: "):
            error = error[len(cause) + 2 :]  # the code is said once, in front
        # Our errors name their own fix ("Fix: …"); the code's fix is for the others.
        fix = "" if "fix:" in error.lower() else f" Fix: {failure_fix(cause)}."
        return STATE_FAILED, (
            f"{cause or 'failed'}: {error}{fix} Retried {utc_text(row.get('nextDueAt'))}, "
            "or at once when the declaration changes."
        )
    return STATE_NEVER, "no sweep recorded yet"


@dataclass(frozen=True)
class FinishedRun:
    run_id: str
    finished_at: float


def refresh_request(
    finished: Iterable[FinishedRun], last_refreshed: float | None
) -> tuple[str | None, float | None]:
    """(run key of the status refresh to request, or None; the new cursor). A refresh is
    asked when a monitored run finished after ``last_refreshed``; its key names the latest
    such run, so the same batch never asks twice."""
    newer = [r for r in finished if last_refreshed is None or r.finished_at > last_refreshed]
    if not newer:
        return None, last_refreshed
    latest = max(newer, key=lambda r: (r.finished_at, r.run_id))
    return f"{RUN_KEY_PREFIX}:after:{latest.run_id}", latest.finished_at


def behind_line(
    due_reason: str | None, indexed: str | None, current: str | None
) -> tuple[bool | None, str | None]:
    """(behind, why) for one repo, from the sweep sensor's own due reason
    (``sweep.rules.scheduling.due_reason``); None when the repo cannot be read now and nothing
    else says so."""
    if due_reason == DUE_REVISION_MOVED or (
        indexed is not None and current is not None and indexed != current
    ):
        return True, f"head moved from {str(indexed)[:12]} to {str(current)[:12]}"
    if due_reason == DUE_DECLARATION_MOVED:
        return True, "declaration changed"
    if due_reason == DUE_GENERATION_CHANGED:
        return True, "embedding generation changed"
    if due_reason == DUE_NEVER_SWEPT:
        return True, "never swept"
    if current is None:
        return None, "the repo cannot be read now"
    return False, None
