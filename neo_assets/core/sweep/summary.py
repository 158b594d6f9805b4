"""The sweep summary's counts, in one spelling, and the reading of summaries stored before.

The counts are camelCase, the contract's style for every JSON document
(``deferredCauseCode``, ``consecutiveFailures``, ...). Releases before this one spelled
the two-word counts in snake_case (``already_present``, ``fenced_poison``, ...); the
ledger's ``last_summary`` of an existing knowledge base still holds that spelling, so a
stored summary is read through ``read_stored_summary`` (either spelling, the new one
winning), and ``neo-assets sweep --json`` prints both for one release
(``with_deprecated_spellings``; README, "Deprecated keys").
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

OFFERED = "offered"
EMBEDDED = "embedded"
ALREADY_FENCED = "alreadyFenced"
FENCED_POISON = "fencedPoison"
FENCED_UNDELIVERABLE = "fencedUndeliverable"
DEFERRED = "deferred"
REQUESTS = "requests"
# Added by the sweep around the lane's counts.
ALREADY_PRESENT = "alreadyPresent"
REUSED = "reused"
CHUNKS = "chunks"

# The counts every lane summary carries, each from 0.
LANE_COUNTS = (
    OFFERED,
    EMBEDDED,
    ALREADY_FENCED,
    FENCED_POISON,
    FENCED_UNDELIVERABLE,
    DEFERRED,
    REQUESTS,
)

# Each renamed count's spelling before this release (the one-word counts never changed).
DEPRECATED_SPELLINGS: Mapping[str, str] = {
    ALREADY_PRESENT: "already_present",
    ALREADY_FENCED: "already_fenced",
    FENCED_POISON: "fenced_poison",
    FENCED_UNDELIVERABLE: "fenced_undeliverable",
}
_CURRENT_OF = {old: new for new, old in DEPRECATED_SPELLINGS.items()}


def zero_lane_counts() -> dict[str, int]:
    return dict.fromkeys(LANE_COUNTS, 0)


def current_counts(counts: object) -> dict[str, Any]:
    """``counts`` in this release's spelling: a deprecated key read as its new one (the new
    one wins when a document has both). Not a mapping: no counts."""
    if not isinstance(counts, Mapping):
        return {}
    out: dict[str, Any] = {}
    for key, value in counts.items():
        current = _CURRENT_OF.get(key)
        if current is None:
            out[key] = value
        elif current not in counts:
            out[current] = value
    return out


def with_deprecated_spellings(counts: Mapping[str, Any]) -> dict[str, Any]:
    """``counts`` plus each renamed count under its old spelling, equal to the new one:
    what the CLI's JSON prints for one release so readers of the old keys keep working."""
    out = current_counts(counts)
    out.update((old, out[new]) for new, old in DEPRECATED_SPELLINGS.items() if new in out)
    return out


def metric_name(key: str) -> str:
    """The name a count is plotted under in the Dagster UI (``count_<name>``): the old
    spelling, so the plots' history of each count goes on under the same name."""
    return DEPRECATED_SPELLINGS.get(key, key)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(frozen=True)
class StoredSummary:
    """A sweep summary as the ledger's ``last_summary`` holds it, read either spelling."""

    counts: Mapping[str, Any] = field(default_factory=dict)
    errors: tuple[Any, ...] = ()

    def count(self, key: str) -> int:
        """The count ``key`` (this release's spelling); 0 when absent or not a count."""
        return _count(self.counts.get(key))

    def first_error_line(self) -> str | None:
        """The first line of the first error's message (None: no error, or unreadable)."""
        if not self.errors or not isinstance(self.errors[0], Mapping):
            return None
        message = str(self.errors[0].get("message") or "").strip()
        return message.splitlines()[0] if message else None


def read_stored_summary(raw: object) -> StoredSummary:
    """``last_summary`` (JSON text) read as a ``StoredSummary``; a missing, torn or
    non-object summary reads as an empty one (the status and due checks never fail on
    it)."""
    try:
        doc = json.loads(raw) if isinstance(raw, str | bytes) else None
    except ValueError:
        doc = None
    if not isinstance(doc, Mapping):
        return StoredSummary()
    errors = doc.get("errors")
    return StoredSummary(
        counts=current_counts(doc.get("counts")),
        errors=tuple(errors) if isinstance(errors, list) else (),
    )
