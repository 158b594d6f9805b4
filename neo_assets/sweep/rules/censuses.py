"""Per-family fence censuses: what stays visible after a fence-only repo completes. A census
that is not whole reads as ``None`` ("not observed"), never as a smaller one.
Design: docs/design/sweep.md#censuses"""

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
    """The census of one fence ``family`` over ``fence_rows``, each re-checked by the fence gate;
    ``{"count": 0, "ids": []}`` when the family was observed and none found. Raises
    ``ValueError`` for an unknown family or a bad cap."""
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
    """Canonical JSON for the ledger (``"null"`` for ``None``); raises ``ValueError`` for an
    invalid census, so nothing is persisted that would read back as ``None``."""
    if census is None:
        return "null"
    if not is_valid_census(census, cap):
        raise ValueError(f"not a valid census: {census!r}")
    return json.dumps(
        {"count": census["count"], "ids": list(census["ids"])},
        sort_keys=True,
        separators=(",", ":"),
    )


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        # json.loads would silently keep the last value: a record that says two things is torn.
        raise ValueError("duplicate key")
    return dict(pairs)


def decode_census(raw: object, cap: int = CENSUS_MAX_IDS) -> Census | None:
    """Read a persisted census (JSON text, UTF-8 bytes or a parsed mapping); ``None`` unless the
    record is whole and ``is_valid_census``. Never raises for bad data."""
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
