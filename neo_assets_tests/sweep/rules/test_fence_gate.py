"""The fence gate: a row is a durable fence only when every clause holds; fail closed."""

import copy
import re

import pytest
from hypothesis import find, given
from hypothesis import strategies as st

from neo_assets.core import codes
from neo_assets.sweep.rules.fence_gate import FENCEABLE_CODES, fence_family, is_durable_fence

CHUNK = "a" * 64
POISON = codes.DISPOSITION_PROVEN_CONTENT_POISON
UNDELIVERABLE = codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY


def fence_row(
    disposition: str = POISON,
    code: str = codes.KB_VECTOR_EMBED_CONTENT,
    chunk: str = CHUNK,
) -> dict:
    return {
        "code": code,
        "message": "fenced",
        "details": {
            "chunkId": chunk,
            "reasonCode": code,
            "disposition": disposition,
            "observedAt": 1.0,
        },
    }


def mutated(change) -> dict:  # type: ignore[no-untyped-def]
    row = fence_row()
    change(row)
    return row


def test_a_well_formed_row_of_each_family_is_a_fence() -> None:
    poison = fence_row(POISON, codes.KB_VECTOR_EMBED_CONTENT)
    undeliverable = fence_row(UNDELIVERABLE, codes.KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY)
    assert is_durable_fence(poison) and fence_family(poison) == POISON
    assert is_durable_fence(undeliverable) and fence_family(undeliverable) == UNDELIVERABLE


@pytest.mark.parametrize("code", sorted(FENCEABLE_CODES))
@pytest.mark.parametrize("disposition", sorted(codes.FENCE_DISPOSITIONS))
def test_every_fenceable_code_and_disposition_pair_passes(code: str, disposition: str) -> None:
    assert fence_family(fence_row(disposition, code)) == disposition


def _set(path: tuple[str, ...], value: object):  # type: ignore[no-untyped-def]
    def change(row: dict) -> None:
        target = row
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


def _drop(path: tuple[str, ...]):  # type: ignore[no-untyped-def]
    def change(row: dict) -> None:
        target = row
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return change


NOT_FENCES = {
    # clause 1: disposition
    "disposition missing": mutated(_drop(("details", "disposition"))),
    "disposition None": mutated(_set(("details", "disposition"), None)),
    "disposition int": mutated(_set(("details", "disposition"), 1)),
    "disposition bytes": mutated(_set(("details", "disposition"), POISON.encode())),
    "disposition list": mutated(_set(("details", "disposition"), [POISON])),
    "disposition unknown word": mutated(_set(("details", "disposition"), "poison")),
    "disposition wrong case": mutated(_set(("details", "disposition"), POISON.upper())),
    "disposition padded": mutated(_set(("details", "disposition"), POISON + " ")),
    "disposition empty": mutated(_set(("details", "disposition"), "")),
    # clause 2: coherence
    "reasonCode missing": mutated(_drop(("details", "reasonCode"))),
    "reasonCode differs": mutated(_set(("details", "reasonCode"), codes.KB_VECTOR_EMBED_TIMEOUT)),
    "reasonCode None": mutated(_set(("details", "reasonCode"), None)),
    "code missing": mutated(_drop(("code",))),
    "code and reasonCode both None": mutated(
        lambda row: (row.__setitem__("code", None), row["details"].__setitem__("reasonCode", None))
    ),
    # clause 3: chunk id
    "chunkId missing": mutated(_drop(("details", "chunkId"))),
    "chunkId uppercase": mutated(_set(("details", "chunkId"), "A" * 64)),
    "chunkId 63 hex": mutated(_set(("details", "chunkId"), "a" * 63)),
    "chunkId 65 hex": mutated(_set(("details", "chunkId"), "a" * 65)),
    "chunkId trailing newline": mutated(_set(("details", "chunkId"), "a" * 64 + "\n")),
    "chunkId non-hex": mutated(_set(("details", "chunkId"), "g" * 64)),
    "chunkId int": mutated(_set(("details", "chunkId"), 12)),
    "chunkId None": mutated(_set(("details", "chunkId"), None)),
    # clause 4: the code itself must be one that a fence may excuse
    "code unclassified": fence_row(POISON, codes.KB_VECTOR_EMBED_UNCLASSIFIED),
    "code store failed": fence_row(UNDELIVERABLE, codes.STORE_FAILED),
    "code parse failed": fence_row(POISON, codes.PARSE_FAILED),
    "code frozen": fence_row(POISON, codes.KB_COLLECTION_FROZEN),
    "code unknown": fence_row(POISON, "SOMETHING_ELSE"),
    # shape
    "details None": mutated(_set(("details",), None)),
    "details list": mutated(_set(("details",), [CHUNK, POISON])),
    "details str": mutated(_set(("details",), "proven-content-poison")),
    "details missing": mutated(_drop(("details",))),
    "row None": None,
    "row list": [codes.KB_VECTOR_EMBED_CONTENT, {"disposition": POISON}],
    "row str": "KB_VECTOR_EMBED_CONTENT",
}


@pytest.mark.parametrize("name", sorted(NOT_FENCES))
def test_a_row_failing_any_clause_is_not_a_fence(name: str) -> None:
    row = NOT_FENCES[name]
    assert not is_durable_fence(row)
    assert fence_family(row) is None


def test_the_gate_does_not_mutate_the_row() -> None:
    row = fence_row()
    before = copy.deepcopy(row)
    fence_family(row)
    assert row == before


# An independent statement of the gate, to compare on arbitrary shapes.
_HEX64 = re.compile(r"[a-f0-9]{64}")


def reference_gate(row: object) -> bool:
    if not isinstance(row, dict) or not isinstance(row.get("details"), dict):
        return False
    details = row["details"]
    code = row.get("code")
    return (
        type(code) is str
        and code in FENCEABLE_CODES
        and details.get("reasonCode") == code
        and type(details.get("reasonCode")) is str
        and type(details.get("disposition")) is str
        and details["disposition"] in {"proven-content-poison", "undeliverable-at-geometry"}
        and type(details.get("chunkId")) is str
        and _HEX64.fullmatch(details["chunkId"]) is not None
    )


_code = st.sampled_from(
    sorted(FENCEABLE_CODES) + [codes.KB_VECTOR_EMBED_UNCLASSIFIED, codes.STORE_FAILED, "X"]
)
_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5))
_maybe_code = st.one_of(_code, _scalar)
_disposition = st.one_of(
    st.sampled_from([POISON, UNDELIVERABLE, "proven-content-poison ", "undeliverable"]), _scalar
)
_chunk = st.one_of(
    st.just(CHUNK),
    st.text(alphabet="0123456789abcdefABCDEF\n", min_size=62, max_size=66),
    _scalar,
)


def _sometimes(draw: st.DrawFn) -> bool:
    # Mutate a component about one time in five, so about half the rows stay whole fences.
    return draw(st.integers(0, 4)) == 0


@st.composite
def rows(draw: st.DrawFn) -> object:
    code = draw(st.sampled_from(sorted(FENCEABLE_CODES)))
    if _sometimes(draw):
        code = draw(_maybe_code)
    details: dict = {
        "chunkId": CHUNK,
        "reasonCode": code,
        "disposition": draw(st.sampled_from([POISON, UNDELIVERABLE])),
    }
    for key, alternative in (
        ("chunkId", _chunk),
        ("reasonCode", _maybe_code),
        ("disposition", _disposition),
    ):
        if _sometimes(draw):
            if draw(st.booleans()):
                del details[key]
            else:
                details[key] = draw(alternative)
    row: dict = {"code": code, "message": "m", "details": details}
    if _sometimes(draw):
        del row["code"]
    if _sometimes(draw):
        row["details"] = draw(st.one_of(_scalar, st.lists(_scalar, max_size=2)))
    if _sometimes(draw):
        return draw(_scalar)
    return row


@given(rows())
def test_the_gate_agrees_with_an_independent_statement_and_never_raises(row: object) -> None:
    assert is_durable_fence(row) == reference_gate(row)
    family = fence_family(row)
    assert (family is not None) == is_durable_fence(row)
    if family is not None:
        assert isinstance(row, dict) and family == row["details"]["disposition"]


def test_the_generator_reaches_fences_and_non_fences() -> None:
    # Guards the property above against a generator that only ever builds one kind.
    assert reference_gate(find(rows(), reference_gate))
    assert not reference_gate(find(rows(), lambda row: not reference_gate(row)))
