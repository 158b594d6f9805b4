"""Per-family fence censuses: gate, dedupe, sort, cap; a torn record reads back whole as None."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neo_assets.core import codes
from neo_assets.sweep.rules.censuses import (
    CENSUS_FIELD_BY_FAMILY,
    CENSUS_MAX_IDS,
    build_census,
    build_censuses,
    decode_census,
    encode_census,
    is_valid_census,
)

POISON = codes.DISPOSITION_PROVEN_CONTENT_POISON
UNDELIVERABLE = codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY
SECRET = codes.DISPOSITION_SECRET


def chunk(n: int) -> str:
    return f"{n:064x}"


def fence(disposition: str, n: int, code: str = codes.KB_VECTOR_EMBED_CONTENT) -> dict:
    return {
        "code": code,
        "message": "fenced",
        "details": {"chunkId": chunk(n), "reasonCode": code, "disposition": disposition},
    }


def test_cap_is_32() -> None:
    assert CENSUS_MAX_IDS == 32


def test_ids_are_deduplicated_sorted_and_capped_while_count_is_not() -> None:
    numbers = list(range(40, 0, -1))  # 40 distinct ids, in descending order
    rows = [fence(POISON, n) for n in numbers] + [fence(POISON, n) for n in numbers[:10]]
    census = build_census(rows, POISON)
    assert census["count"] == 40
    assert census["ids"] == [chunk(n) for n in range(1, 33)]


def test_an_empty_family_is_an_observed_zero_not_none() -> None:
    assert build_census([], POISON) == {"count": 0, "ids": []}
    assert build_census([fence(UNDELIVERABLE, 1)], POISON) == {"count": 0, "ids": []}


def test_the_families_are_never_merged() -> None:
    rows = [fence(POISON, 1), fence(POISON, 2), fence(UNDELIVERABLE, 2), fence(UNDELIVERABLE, 3)]
    rows.append(fence(UNDELIVERABLE, 4, codes.KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY))
    rows.append(fence(SECRET, 5, codes.KB_CHUNK_SECRET))
    assert build_census(rows, POISON) == {"count": 2, "ids": [chunk(1), chunk(2)]}
    assert build_census(rows, UNDELIVERABLE) == {
        "count": 3,
        "ids": [chunk(2), chunk(3), chunk(4)],
    }
    assert build_censuses(rows) == {
        "contentPoisonChunks": build_census(rows, POISON),
        "undeliverableChunks": build_census(rows, UNDELIVERABLE),
        "secretChunks": {"count": 1, "ids": [chunk(5)]},
    }
    assert CENSUS_FIELD_BY_FAMILY == {
        POISON: "contentPoisonChunks",
        UNDELIVERABLE: "undeliverableChunks",
        SECRET: "secretChunks",
    }


def test_rows_failing_the_fence_gate_are_not_counted() -> None:
    bad_id = fence(POISON, 1)
    bad_id["details"]["chunkId"] = "A" * 64
    incoherent = fence(POISON, 2)
    incoherent["details"]["reasonCode"] = codes.KB_VECTOR_EMBED_TIMEOUT
    live = {"code": codes.KB_VECTOR_EMBED_TIMEOUT, "message": "m", "details": {}}
    rows = [bad_id, incoherent, live, None, "x", fence(POISON, 3)]
    assert build_census(rows, POISON) == {"count": 1, "ids": [chunk(3)]}


def test_build_accepts_any_iterable_once() -> None:
    rows = (fence(POISON, n) for n in range(3))
    assert build_census(rows, POISON)["count"] == 3
    assert build_censuses(fence(UNDELIVERABLE, n) for n in range(2))["undeliverableChunks"] == {
        "count": 2,
        "ids": [chunk(0), chunk(1)],
    }


def test_a_smaller_cap_is_honoured() -> None:
    rows = [fence(POISON, n) for n in range(5)]
    assert build_census(rows, POISON, cap=2) == {"count": 5, "ids": [chunk(0), chunk(1)]}
    assert build_census(rows, POISON, cap=0) == {"count": 5, "ids": []}


@pytest.mark.parametrize("family", ["poison", "", None, POISON.upper()])
def test_an_unknown_family_is_refused(family: object) -> None:
    with pytest.raises(ValueError):
        build_census([], family)  # type: ignore[arg-type]


@pytest.mark.parametrize("cap", [-1, 1.5, True, "32"])
def test_a_bad_cap_is_refused(cap: object) -> None:
    with pytest.raises(ValueError):
        build_census([], POISON, cap=cap)  # type: ignore[arg-type]


@given(st.lists(st.integers(0, 80)), st.integers(0, 40))
def test_census_matches_the_set_of_ids(numbers: list[int], cap: int) -> None:
    census = build_census([fence(POISON, n) for n in numbers], POISON, cap)
    distinct = sorted({chunk(n) for n in numbers})
    assert census == {"count": len(distinct), "ids": distinct[:cap]}
    assert is_valid_census(census, cap)
    assert decode_census(encode_census(census, cap), cap) == census


# --- Persistence.


def test_round_trip_through_text_bytes_and_a_parsed_mapping() -> None:
    census = build_census([fence(POISON, n) for n in range(40)], POISON)
    text = encode_census(census)
    assert json.loads(text) == census
    assert decode_census(text) == census
    assert decode_census(text.encode("utf-8")) == census
    assert decode_census(bytearray(text.encode("utf-8"))) == census
    assert decode_census(json.loads(text)) == census
    assert encode_census(None) == "null"
    assert decode_census("null") is None


def test_decoding_returns_a_fresh_copy() -> None:
    stored = {"count": 1, "ids": [chunk(1)]}
    decoded = decode_census(stored)
    assert decoded == stored
    assert decoded is not None and decoded["ids"] is not stored["ids"]


def test_encode_refuses_what_would_not_read_back() -> None:
    for bad in ({"count": 1, "ids": []}, {"count": 0}, {"count": -1, "ids": []}, "x"):
        with pytest.raises(ValueError):
            encode_census(bad)  # type: ignore[arg-type]


def _valid() -> dict:
    return {"count": 40, "ids": [chunk(n) for n in range(32)]}


def _with(**changes: object) -> dict:
    value = _valid()
    value.update(changes)
    return value


CORRUPT = {
    "bad json": "{",
    "empty text": "",
    "json list": "[]",
    "json number": "42",
    "json string": '"census"',
    "duplicate keys": '{"count": 1, "count": 1, "ids": ["' + chunk(1) + '"]}',
    "invalid utf-8 bytes": b"\xff\xfe{",
    "count missing": {"ids": []},
    "ids missing": {"count": 0},
    "extra key": _with(total=40),
    "count str": _with(count="40"),
    "count float": _with(count=40.0),
    "count bool": {"count": True, "ids": [chunk(1)]},
    "count negative": {"count": -1, "ids": []},
    "count None": _with(count=None),
    "count NaN text": '{"count": NaN, "ids": []}',
    "count below ids": _with(count=31),
    "count above ids below cap": {"count": 3, "ids": [chunk(1), chunk(2)]},
    "ids over cap": {"count": 33, "ids": [chunk(n) for n in range(33)]},
    "ids not a list": _with(ids={chunk(1): 1}),
    "ids a string": {"count": 1, "ids": chunk(1)},
    "id uppercase": {"count": 1, "ids": ["A" * 64]},
    "id short": {"count": 1, "ids": ["a" * 63]},
    "id int": {"count": 1, "ids": [1]},
    "id None": {"count": 1, "ids": [None]},
    "ids unsorted": {"count": 2, "ids": [chunk(2), chunk(1)]},
    "ids duplicated": {"count": 2, "ids": [chunk(1), chunk(1)]},
    "deep nesting": "[" * 100_000 + "]" * 100_000,
    "raw int": 7,
    "raw None": None,
    "raw list": [40, [chunk(1)]],
}


@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_each_corruption_kind_reads_as_not_observed(kind: str) -> None:
    raw = CORRUPT[kind]
    assert decode_census(raw) is None
    if isinstance(raw, dict):
        # the same corruption as persisted JSON text reads the same way
        assert decode_census(json.dumps(raw)) is None


def test_every_torn_prefix_of_a_record_reads_as_none_never_as_a_smaller_census() -> None:
    text = encode_census(_valid())
    assert decode_census(text) == _valid()
    for end in range(len(text)):
        assert decode_census(text[:end]) is None, text[:end]


@given(st.one_of(st.text(max_size=200), st.binary(max_size=200)))
def test_decode_never_raises_and_yields_none_or_a_valid_census(raw: object) -> None:
    decoded = decode_census(raw)
    assert decoded is None or is_valid_census(decoded)


_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-2, 40),
        st.floats(),
        st.sampled_from([chunk(1), chunk(2), "A" * 64, ""]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["count", "ids", "x"]), inner, max_size=3),
    ),
    max_leaves=12,
)


@given(_json)
def test_decode_of_arbitrary_json_values_is_none_or_exactly_valid(value: object) -> None:
    decoded = decode_census(value)
    if decoded is None:
        assert not is_valid_census(value)
    else:
        assert decoded == value and is_valid_census(decoded)
