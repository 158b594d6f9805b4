"""Per-family fence censuses: what stays visible after a fence-only repo completes.

Completing a fence-only repo removes the held checkpoint that was the only standing
signal, so each repo persists one census per fence family (three), never merged:

- ``contentPoisonChunks`` (family ``proven-content-poison``): bad content an operator
  should fix;
- ``undeliverableChunks`` (family ``undeliverable-at-geometry``): healthy content the
  current geometry cannot deliver. One merged count would tell an operator to fix a file
  whose only fault is the ceiling.
- ``secretChunks`` (family ``secret``): chunks holding a secret, never sent, stored or
  served (the operator removes the secret from the file; the changed chunk is re-offered).

A census is ``{"count": int, "ids": [str, ...]}``: ``ids`` are the distinct chunk ids of
that family that pass the 64-hex gate, sorted, at most ``CENSUS_MAX_IDS`` of them (the
smallest ones); ``count`` is the number of distinct valid ids, not capped. So a valid
census always has ``len(ids) == min(count, CENSUS_MAX_IDS)``.

``None`` means "not observed". A persisted record that is torn, unreadable or ill-typed
degrades WHOLE to ``None`` (``decode_census``), never to a smaller or default census:
an operator must never read "3 poisoned chunks" off a record that said 40.
"""

import json
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict, cast

from neo_assets.core import codes
from neo_assets.core.ids.chunk_ids import is_chunk_id
from neo_assets.sweep.rules.fence_gate import fence_family

CENSUS_MAX_IDS = 32

# The ledger/status field that carries each family's census.
CENSUS_FIELD_BY_FAMILY: dict[str, str] = {
    codes.DISPOSITION_PROVEN_CONTENT_POISON: "contentPoisonChunks",
    codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY: "undeliverableChunks",
    codes.DISPOSITION_SECRET: "secretChunks",
}


class Census(TypedDict):
    count: int
    ids: list[str]


def build_census(fence_rows: Iterable[object], family: str, cap: int = CENSUS_MAX_IDS) -> Census:
    """The census of one fence ``family`` over ``fence_rows``.

    Every row is re-checked with the full fence gate, so passing all of a summary's error
    rows is safe: live rows, malformed fences and the other family are ignored. The two
    families are never merged. With no row of the family the census is
    ``{"count": 0, "ids": []}``: the sweep observed the family and found none (``None`` is
    reserved for "not observed").

    Raises ``ValueError`` for an unknown family or a cap that is not a non-negative int.
    """
    if family not in codes.FENCE_DISPOSITIONS:
        raise ValueError(f"unknown fence family: {family!r}")
    _check_cap(cap)
    distinct = sorted(
        {
            row["details"]["chunkId"]  # the gate guarantees this shape
            for row in fence_rows
            if fence_family(row) == family
        }
    )
    return {"count": len(distinct), "ids": distinct[:cap]}


def build_censuses(fence_rows: Iterable[object], cap: int = CENSUS_MAX_IDS) -> dict[str, Census]:
    """Both censuses, keyed by their persisted field name (``CENSUS_FIELD_BY_FAMILY``)."""
    rows = list(fence_rows)
    return {
        field: build_census(rows, family, cap) for family, field in CENSUS_FIELD_BY_FAMILY.items()
    }


def is_valid_census(value: object, cap: int = CENSUS_MAX_IDS) -> bool:
    """True only for exactly what ``build_census`` can produce: a mapping with exactly the
    keys ``count`` and ``ids``; ``count`` a non-negative int (not a bool); ``ids`` a list
    of 64-hex strings, strictly increasing (sorted, no duplicates), and
    ``len(ids) == min(count, cap)``."""
    _check_cap(cap)
    if not isinstance(value, Mapping) or set(value.keys()) != {"count", "ids"}:
        return False
    count = value["count"]
    ids = value["ids"]
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        return False
    if not isinstance(ids, list) or not all(is_chunk_id(item) for item in ids):
        return False
    if any(earlier >= later for earlier, later in zip(ids, ids[1:], strict=False)):
        return False
    return len(ids) == min(count, cap)


def encode_census(census: Census | None, cap: int = CENSUS_MAX_IDS) -> str:
    """Canonical JSON for the ledger (``"null"`` for ``None``, "not observed").

    Raises ``ValueError`` for a value that is not a valid census, so nothing is persisted
    that would read back as ``None``.
    """
    if census is None:
        return "null"
    if not is_valid_census(census, cap):
        raise ValueError(f"not a valid census: {census!r}")
    return json.dumps(
        {"count": census["count"], "ids": list(census["ids"])},
        sort_keys=True,
        separators=(",", ":"),
    )


class _DuplicateKey(ValueError):
    pass


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        # json.loads would silently keep the last value: a record that says two things is torn.
        raise _DuplicateKey("duplicate key")
    return dict(pairs)


def decode_census(raw: object, cap: int = CENSUS_MAX_IDS) -> Census | None:
    """Read a persisted census; ``None`` ("not observed") unless the record is whole.

    ``raw`` may be the JSON text (``str``, or UTF-8 ``bytes``) or an already-parsed mapping
    (a JSON column). Anything else, bad JSON, duplicate keys, ``null``, or a value that
    fails ``is_valid_census`` (wrong or extra keys, bool or float or negative count,
    non-list ids, an id that is not 64 hex, unsorted or duplicated ids, more ids than the
    cap, ``count`` disagreeing with the ids) reads as ``None``. Never raises for bad data.
    """
    value: object
    if isinstance(raw, bytes | bytearray):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(raw, str):
        try:
            value = json.loads(raw, object_pairs_hook=_reject_duplicate_keys)
        except (ValueError, RecursionError):
            return None
    elif isinstance(raw, Mapping):
        value = raw
    else:
        return None
    if not is_valid_census(value, cap):
        return None
    whole = cast(Mapping[str, Any], value)
    return {"count": whole["count"], "ids": list(whole["ids"])}


def _check_cap(cap: object) -> None:
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 0:
        raise ValueError(f"census cap must be a non-negative int, got {cap!r}")
