"""The sweep summary: its typed form (``LaneSummary``; ``to_doc()`` is what the ledger's
``last_summary`` keeps) and its camelCase keys in one spelling. A stored summary in the
old snake_case spelling is read by ``read_stored_summary`` (README, "Deprecated keys")."""

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
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
# Chunks the sweep fenced `secret` before the lane (never offered to it).
FENCED_SECRET = "fencedSecret"
CHUNKS = "chunks"
# Present rows whose chunk moved in its file, given its new lines (no text sent again).
LINES_MOVED = "linesMoved"

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
    spelling, so the plots' history of each count goes on under the same name; a count
    added since has no old spelling and is plotted in snake_case like the others."""
    return DEPRECATED_SPELLINGS.get(key) or _snake_case(key)


def _snake_case(key: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key).lstrip("_")


def _camel_case(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.title() for word in rest)


@dataclass(frozen=True)
class StoredSummary:
    """A sweep summary as the ledger's ``last_summary`` holds it, read either spelling."""

    counts: Mapping[str, Any] = field(default_factory=dict)
    errors: tuple[Any, ...] = ()

    def count(self, key: str) -> int:
        """The count ``key`` (this release's spelling); 0 when absent or not a count."""
        value = self.counts.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

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


# ------------------------------------------------------------------ the typed summary
# Each count's attribute, by its JSON key (the lane counts its own in a dict by key): its
# snake_case spelling.
_FIELD_OF: Mapping[str, str] = {
    key: _snake_case(key)
    for key in (*LANE_COUNTS, REUSED, FENCED_SECRET, ALREADY_PRESENT, CHUNKS, LINES_MOVED)
}


@dataclass(frozen=True)
class SweepCounts:
    """What one sweep counted. The lane's seven counts are always there; the ones the
    sweep adds around the lane are None until it does (a lane run on its own, or a sweep
    aborted before its generation was tallied, has no ``chunks``)."""

    offered: int = 0
    embedded: int = 0
    already_fenced: int = 0
    fenced_poison: int = 0
    fenced_undeliverable: int = 0
    deferred: int = 0
    requests: int = 0
    reused: int | None = None
    fenced_secret: int | None = None
    already_present: int | None = None
    chunks: int | None = None
    lines_moved: int | None = None

    @classmethod
    def from_doc(cls, counts: Mapping[str, Any]) -> "SweepCounts":
        """Counts from their JSON keys (either spelling); unknown keys and values that are
        not counts are left out."""
        fields = {
            _FIELD_OF[key]: value
            for key, value in current_counts(counts).items()
            if key in _FIELD_OF and isinstance(value, int) and not isinstance(value, bool)
        }
        return cls(**fields)

    def to_doc(self) -> dict[str, int]:
        """The JSON shape (camelCase keys); a count the sweep did not add is absent."""
        return {
            key: value
            for key, attr in _FIELD_OF.items()
            if (value := getattr(self, attr)) is not None
        }


@dataclass(frozen=True)
class SweepTimings:
    """Seconds inside each stage (the sweep's own work, without its caller's event
    handling) and inside the embedding stage's parts; None: not measured this run."""

    envelope_s: float | None = None
    chunks_s: float | None = None
    embed_s: float | None = None
    census_s: float | None = None
    stages_s: float | None = None
    present_check_s: float | None = None
    write_s: float | None = None
    embed_total_s: float | None = None
    # Of chunks_s: building and writing the code tools' index (code_tools.index_store).
    code_index_s: float | None = None

    def to_doc(self) -> dict[str, float]:
        return {
            key: value
            for attr, key in TIMING_KEYS.items()
            if (value := getattr(self, attr)) is not None
        }


# Each stage time's JSON key (``envelope_s``: ``envelopeSeconds``) by its attribute, which
# was its spelling before camelCase (kept for one release).
TIMING_KEYS: Mapping[str, str] = {
    timing.name: _camel_case(timing.name.removesuffix("_s")) + "Seconds"
    for timing in fields(SweepTimings)
}


def with_deprecated_timing_keys(timings: Mapping[str, Any]) -> dict[str, Any]:
    """``timings`` plus each time under its snake_case spelling before this release, equal
    to the camelCase one (what ``sweep --json`` prints for one release)."""
    out = dict(timings)
    out.update((old, out[new]) for old, new in TIMING_KEYS.items() if new in out)
    return out


@dataclass(frozen=True)
class LaneSummary:
    """What the embedding stage hands to the census: counts, error rows (fence and live), strike
    and event rows, the generation, and what the sweep adds around the lane. The rows stay
    the contract's JSON shapes, so the fence gate validates every row it would take as a fence."""

    counts: SweepCounts = field(default_factory=SweepCounts)
    errors: tuple[Mapping[str, Any], ...] = ()
    strikes: tuple[Mapping[str, Any], ...] = ()
    events: tuple[Mapping[str, Any], ...] = ()
    generation: str | None = None
    revision: str | None = None
    notices: tuple[str, ...] = ()
    # The band the split worked to (``Band.describe()``).
    band: Mapping[str, Any] | None = None
    # The vector verdicts of the sweep's answers (the freeze reads them).
    vector_evidence: Mapping[str, Any] | None = None
    # The freeze record this sweep made or found, when it froze the collection.
    freeze: Mapping[str, Any] | None = None
    timings: SweepTimings = field(default_factory=SweepTimings)
    # Seconds the embedding stage took, end to end.
    seconds: float | None = None

    def to_doc(self) -> dict[str, Any]:
        """The JSON shape, as the ledger's ``last_summary`` keeps it."""
        doc: dict[str, Any] = {
            "counts": self.counts.to_doc(),
            "errors": [dict(row) for row in self.errors],
            "strikes": [dict(row) for row in self.strikes],
            "events": [dict(row) for row in self.events],
            "generation": self.generation,
            "notices": list(self.notices),
            "timings": self.timings.to_doc(),
        }
        optional = {
            "revision": self.revision,
            "band": self.band,
            "vectorEvidence": self.vector_evidence,
            "freeze": self.freeze,
            "seconds": self.seconds,
        }
        doc.update((key, value) for key, value in optional.items() if value is not None)
        return doc
