"""What classification hands the shell: the orphan kinds and one tenant's plan (per kind its
sorted ids; what to delete, re-stamp and report as pending).
Design: docs/design/reconcile.md#orphans"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from neo_assets.core import codes

ORPHAN_KINDS = (
    codes.KIND_MANIFEST_ORPHAN,
    codes.KIND_UNDECLARED_REPO,
    codes.KIND_UNYIELDED_PATH,
    codes.KIND_SUPERSEDED_GENERATION,
    codes.KIND_SUPERSEDED_PENDING,
    codes.KIND_STALE_CONTENT,
    codes.KIND_STALE_CONTENT_PENDING,
    codes.KIND_CONFIG_STALE,
    codes.KIND_MANIFEST_ORPHAN_PENDING,
)
ACTIONABLE_KINDS = frozenset(
    {
        codes.KIND_MANIFEST_ORPHAN,
        codes.KIND_UNDECLARED_REPO,
        codes.KIND_UNYIELDED_PATH,
        codes.KIND_SUPERSEDED_GENERATION,
        codes.KIND_STALE_CONTENT,
    }
)
PENDING_KINDS = frozenset(
    {
        codes.KIND_SUPERSEDED_PENDING,
        codes.KIND_STALE_CONTENT_PENDING,
        codes.KIND_MANIFEST_ORPHAN_PENDING,
    }
)

TELEMETRY_EXAMPLE_IDS = 5


@dataclass(frozen=True, slots=True)
class ReconcilePlan:
    """The classification of one tenant's rows (sorted tuples). Every input row is counted
    exactly once: in one kind, ``kept``, ``skipped_unstamped``, ``foreign`` or
    ``duplicate_rows``."""

    tenant_id: str
    ids_by_kind: Mapping[str, tuple[str, ...]]
    delete_ids: tuple[str, ...]
    restamp_ids: tuple[str, ...]
    pending_ids: tuple[str, ...]
    skipped_unstamped: int
    skipped_by_stamp: Mapping[str, int]
    foreign: int
    kept: int
    newer_than_envelope: int
    no_envelope: int
    inconsistent: int
    duplicate_rows: int
    counts: Mapping[str, int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "counts", {kind: len(self.ids_by_kind.get(kind, ())) for kind in ORPHAN_KINDS}
        )

    def telemetry(self, examples: int = TELEMETRY_EXAMPLE_IDS) -> dict[str, Any]:
        """Each kind under its own key with its count and ``examples`` example ids, so one
        kind can never be read as another; the skip and containment counters beside them."""
        return {
            "tenantId": self.tenant_id,
            "orphans": {
                kind: {
                    "count": self.counts[kind],
                    "ids": list(self.ids_by_kind.get(kind, ())[:examples]),
                    "actionable": kind in ACTIONABLE_KINDS,
                }
                for kind in ORPHAN_KINDS
            },
            "actionable": len(self.delete_ids),
            "restamp": len(self.restamp_ids),
            "pending": len(self.pending_ids),
            "skippedUnstamped": self.skipped_unstamped,
            "skippedByStamp": dict(sorted(self.skipped_by_stamp.items())),
            "foreign": self.foreign,
            "kept": self.kept,
            "newerThanEnvelope": self.newer_than_envelope,
            "noEnvelope": self.no_envelope,
            "inconsistent": self.inconsistent,
            "duplicateRows": self.duplicate_rows,
        }
