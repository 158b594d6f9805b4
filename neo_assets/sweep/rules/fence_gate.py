"""The fence gate: when a summary row may be read as a durable fence. Fail-closed: a row that
misses any clause is live work. Design: docs/design/sweep.md#fence-gate"""

from collections.abc import Mapping

from neo_assets.core import codes
from neo_assets.core.ids.chunk_ids import is_chunk_id

# The embedding-domain codes a durable fence may carry. These are exactly the codes that
# defer a sweep when the row is live (outcomes.DEFERRABLE_CODES adds KB_COLLECTION_FROZEN,
# which is about the collection, never about one chunk):
# - the closed KB_VECTOR_EMBED_* taxonomy minus UNCLASSIFIED (an unclassified failure
#   proves nothing, so it can be neither excused nor deferred);
# - the two fence codes themselves;
# - the provider-specific deadline codes, upstream abort and the probe deadline, which the
#   lane keeps distinct "all the way into the summary" (issue 3) and which mean the same as
#   KB_VECTOR_EMBED_TIMEOUT / KB_VECTOR_EMBED_ABORTED for an outcome.
FENCEABLE_CODES: frozenset[str] = frozenset(
    (codes.EMBED_FAILURE_CODES - {codes.KB_VECTOR_EMBED_UNCLASSIFIED})
    | {
        codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON,
        codes.KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY,
        # A secret fence that fails the gate is live work and defers: never completes.
        codes.KB_CHUNK_SECRET,
        codes.ABORT_ERR,
    }
    | codes.DEADLINE_CAUSE_CODES
)


def fence_family(row: object) -> str | None:
    """The fence family of ``row`` when it passes every clause of the gate, else ``None``. Never
    raises: any shape it does not recognise is "not a fence"."""
    if not isinstance(row, Mapping):
        return None
    details = row.get("details")
    if not isinstance(details, Mapping):
        return None
    code = row.get("code")
    disposition = details.get("disposition")
    reason_code = details.get("reasonCode")
    if not isinstance(code, str) or code not in FENCEABLE_CODES:
        return None
    if not isinstance(reason_code, str) or reason_code != code:
        return None
    if not isinstance(disposition, str) or disposition not in codes.FENCE_DISPOSITIONS:
        return None
    if not is_chunk_id(details.get("chunkId")):
        return None
    return disposition


def is_durable_fence(row: object) -> bool:
    """True only when ``row`` passes every clause of the fence gate
    (docs/design/sweep.md#fence-gate)."""
    return fence_family(row) is not None
