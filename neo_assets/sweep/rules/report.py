"""One repo's sweep as the census recorded it: ``SweepReport.to_doc()`` is the per-repo
document ``neo-assets sweep --json`` prints and ``fence_census`` outputs (CONTRACT.md,
"sweep"); the secret census adds ``locations`` (path and line, never the secret)."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from neo_assets.core import codes
from neo_assets.sweep.rules.summary import SweepCounts, SweepTimings

EMPTY_CENSUS: Mapping[str, Any] = {"count": 0, "ids": []}


@dataclass(frozen=True)
class SweepReport:
    tenant_id: str
    repo_slug: str
    outcome: str
    revision: str | None
    # None: the sweep counted nothing (skipped, or deferred before its lane).
    counts: SweepCounts | None = None
    deferred_cause_code: str | None = None
    consecutive_failures: int = 0
    next_due_at: float | None = None
    content_poison_chunks: Mapping[str, Any] = field(default_factory=lambda: EMPTY_CENSUS)
    undeliverable_chunks: Mapping[str, Any] = field(default_factory=lambda: EMPTY_CENSUS)
    secret_chunks: Mapping[str, Any] = field(default_factory=lambda: EMPTY_CENSUS)
    strikes: tuple[Mapping[str, Any], ...] = ()
    embedding_generation: str | None = None
    timings: SweepTimings = field(default_factory=SweepTimings)
    notices: tuple[str, ...] = ()
    # Live rows of a sweep that ended before its lane (the census keeps the lane's).
    errors: tuple[Mapping[str, Any], ...] = ()
    lease: Mapping[str, Any] | None = None
    # What the user is told of a sweep that did not complete: its cause's own message
    # (a provider that is not there names its URL and the fix).
    error: str | None = None

    @property
    def skipped(self) -> bool:
        return self.outcome == codes.OUTCOME_SKIPPED

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "tenantId": self.tenant_id,
            "repoSlug": self.repo_slug,
            "outcome": self.outcome,
            "revision": self.revision,
            "counts": self.counts.to_doc() if self.counts is not None else {},
            "deferredCauseCode": self.deferred_cause_code,
        }
        if not self.skipped:  # a skipped sweep ran no stage: it has nothing more to say
            doc |= {
                "consecutiveFailures": self.consecutive_failures,
                "nextDueAt": self.next_due_at,
                "contentPoisonChunks": dict(self.content_poison_chunks),
                "undeliverableChunks": dict(self.undeliverable_chunks),
                "secretChunks": dict(self.secret_chunks),
                "strikes": [dict(row) for row in self.strikes],
                "embeddingGeneration": self.embedding_generation,
                "timings": self.timings.to_doc(),
                "notices": list(self.notices),
            }
            if self.errors:
                doc["errors"] = [dict(row) for row in self.errors]
        if self.lease is not None:
            doc["lease"] = dict(self.lease)
        if self.error is not None:
            doc["error"] = self.error
        return doc


def cause_message(errors: tuple[Mapping[str, Any], ...], cause: str | None) -> str | None:
    """The first line of the first error row carrying ``cause`` (None: no such row)."""
    for row in errors:
        message = row.get("message")
        if row.get("code") == cause and isinstance(message, str) and message.strip():
            return message.strip().splitlines()[0][:500]
    return None
