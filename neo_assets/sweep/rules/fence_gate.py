"""The fence gate: when a summary row may be read as a durable fence.

A durable fence is a settled fact about the current embedding generation: the chunk was
proven to be bad content (``proven-content-poison``) or is healthy content the current
geometry cannot deliver (``undeliverable-at-geometry``). Re-running a sweep cannot change
it; only a content or generation change can. The sweep classifier therefore ignores
fence rows, and that makes the gate the one place where a row's ``details`` (free,
unvalidated shape) can change an outcome. It is read fail-closed:

A row is a durable fence only when ALL of these hold:

1. ``row["details"]["disposition"]`` is a ``str`` in the closed vocabulary
   ``codes.FENCE_DISPOSITIONS``;
2. ``row["details"]["reasonCode"] == row["code"]`` and ``row["code"]`` is a ``str``
   (the lane writes both; disagreement means this contract did not write the row);
3. ``row["details"]["chunkId"]`` passes ``chunk_ids.is_chunk_id`` (64 lowercase hex);
4. ``row["code"]`` is in ``FENCEABLE_CODES``: an embedding-domain code that would defer
   the sweep if the row were live. A fence may turn a deferral into a settled fact; it
   may never excuse a row whose code alone would fail the sweep (an unclassified error,
   a store or parse failure, an unknown code). This clause is one step stricter than the
   issue's three, in the same fail-closed direction.

Anything else (a row or ``details`` that is not a mapping, a missing key, a non-string,
an unknown vocabulary word, an incoherent pair, a malformed id) is NOT a fence: the row
is live work and is classified by its code like any other row.
"""

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
    """The fence family of ``row`` (``codes.DISPOSITION_PROVEN_CONTENT_POISON``,
    ``codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY`` or ``codes.DISPOSITION_SECRET``) when
    it passes every clause of the gate; ``None`` for any row that is not a durable fence.

    Never raises: any shape it does not recognise is "not a fence".
    """
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
    """True only when ``row`` passes every clause of the fence gate (module docstring)."""
    return fence_family(row) is not None
