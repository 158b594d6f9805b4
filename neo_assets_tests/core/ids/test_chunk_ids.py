"""A chunk's id is the contract's: sha256 of the identity tuple as canonical JSON."""

import hashlib
import json

from hypothesis import given
from hypothesis import strategies as st

from neo_assets.core.ids.chunk_ids import chunk_id, is_chunk_id


def _contract_id(*fields: str) -> str:
    payload = json.dumps(list(fields), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8", errors="surrogatepass")).hexdigest()


def test_a_known_chunk_keeps_its_id() -> None:
    # Pinned: an id that changes re-embeds every row of every tenant.
    got = chunk_id(
        "acme",
        "widgets",
        "function",
        "render",
        'def render():\n    return "ü"\n',
        "widgets/core.py",
        "neo-code",
        "1.0.0",
    )
    assert got == "a1e63f05b911eb9a27abaec3f94f1cc72f3cea7d7aabadb782c4a60972faa7ac"
    assert is_chunk_id(got)


@given(st.lists(st.text(), min_size=8, max_size=8))
def test_the_id_is_the_canonical_json_digest_for_any_text(fields: list[str]) -> None:
    assert chunk_id(*fields) == _contract_id(*fields)


def test_fields_cannot_bleed_into_each_other() -> None:
    rest = ("function", "f", "x", "a.py", "neo-code", "1.0.0")
    assert chunk_id("a", "bc", *rest) != chunk_id("ab", "c", *rest)
