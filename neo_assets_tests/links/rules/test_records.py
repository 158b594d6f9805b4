"""The rules around the link passes: inputs, flat records and expansion order."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neo_assets.links.rules.passes import temporal_links
from neo_assets.links.rules.records import (
    LINK_SEMANTIC,
    LINK_TEMPORAL,
    LinkRecord,
    Neighbour,
    generation_groups,
    link_records,
    strongest_neighbours,
    temporal_items,
)

# ------------------------------------------------------------------ temporal_items


def test_temporal_items_take_each_chunks_file_time() -> None:
    chunks = [("a", "function", "x.py"), ("b", "class", "x.py"), ("c", "function", "y.py")]
    assert temporal_items(chunks, {"x.py": 10.0, "y.py": 20}) == [
        ("a", "function", 10.0),
        ("b", "class", 10.0),
        ("c", "function", 20.0),
    ]


@pytest.mark.parametrize("unobserved", [None, math.nan, math.inf, -math.inf, "12", True])
def test_an_undated_file_gives_nan_and_never_links(unobserved: object) -> None:
    items = temporal_items(
        [("a", "function", "x.py"), ("b", "function", "y.py"), ("c", "function", "gone.py")],
        {"x.py": 100.0, "y.py": unobserved},  # gone.py: no entry at all
    )
    assert items[0] == ("a", "function", 100.0)
    assert math.isnan(items[1][2]) and math.isnan(items[2][2])
    # Unobserved is not "long ago" or "now": such a chunk is never linked in time.
    assert temporal_links(items) == {"a": [], "b": [], "c": []}


# ------------------------------------------------------------------ generation_groups


def test_generation_groups_keep_positions_in_first_seen_order() -> None:
    rows = [("a", "g1"), ("b", "g2"), ("c", "g1"), ("d", None), ("e", "g2")]
    assert generation_groups(rows) == {"g1": [0, 2], "g2": [1, 4], None: [3]}
    assert list(generation_groups(rows)) == ["g1", "g2", None]
    assert generation_groups([]) == {}


# ------------------------------------------------------------------ link_records


def test_link_records_rank_each_chunks_links_in_the_given_order() -> None:
    links = {"a": [("b", 0.9), ("c", 0.8)], "b": [("a", 0.9)], "c": []}
    assert link_records(LINK_SEMANTIC, links) == [
        LinkRecord("a", LINK_SEMANTIC, "b", 0.9, 0),
        LinkRecord("a", LINK_SEMANTIC, "c", 0.8, 1),
        LinkRecord("b", LINK_SEMANTIC, "a", 0.9, 0),
    ]


def test_link_records_refuse_an_unknown_kind_and_a_self_link() -> None:
    with pytest.raises(ValueError, match="unknown link kind"):
        link_records("lexical", {"a": [("b", 1.0)]})
    with pytest.raises(ValueError, match="itself"):
        link_records(LINK_TEMPORAL, {"a": [("a", 1.0)]})


# ------------------------------------------------------------------ strongest_neighbours


def test_one_entry_per_neighbour_its_strongest_link_best_first() -> None:
    links = [
        ("b", LINK_TEMPORAL, 0.75),
        ("b", LINK_SEMANTIC, 0.9),
        ("c", LINK_TEMPORAL, 1.0),
        ("d", LINK_SEMANTIC, 0.71),
    ]
    assert strongest_neighbours(links, exclude="a", limit=10) == [
        Neighbour("c", LINK_TEMPORAL, 1.0),
        Neighbour("b", LINK_SEMANTIC, 0.9),
        Neighbour("d", LINK_SEMANTIC, 0.71),
    ]


def test_a_stronger_temporal_link_wins_over_a_weaker_semantic_one() -> None:
    links = [("b", LINK_SEMANTIC, 0.72), ("b", LINK_TEMPORAL, 0.9)]
    assert strongest_neighbours(links, exclude="a", limit=1) == [Neighbour("b", LINK_TEMPORAL, 0.9)]


def test_equal_weights_prefer_semantic_then_order_by_neighbour_id() -> None:
    tied = [("b", LINK_TEMPORAL, 0.8), ("b", LINK_SEMANTIC, 0.8)]
    assert strongest_neighbours(tied, exclude="a", limit=5) == [Neighbour("b", LINK_SEMANTIC, 0.8)]
    assert strongest_neighbours(list(reversed(tied)), exclude="a", limit=5) == [
        Neighbour("b", LINK_SEMANTIC, 0.8)
    ]
    ids = [("z", LINK_TEMPORAL, 0.5), ("m", LINK_TEMPORAL, 0.5), ("q", LINK_SEMANTIC, 0.5)]
    assert [n.neighbour_id for n in strongest_neighbours(ids, exclude="a", limit=5)] == [
        "q",  # semantic first among equal weights
        "m",
        "z",
    ]


def test_the_chunk_itself_unknown_kinds_and_bad_weights_never_come_back() -> None:
    links = [
        ("a", LINK_SEMANTIC, 1.0),
        ("b", "lexical", 0.99),
        ("c", LINK_TEMPORAL, math.nan),
        ("d", LINK_TEMPORAL, math.inf),
        ("e", LINK_TEMPORAL, 0.3),
    ]
    assert strongest_neighbours(links, exclude="a", limit=10) == [
        Neighbour("e", LINK_TEMPORAL, 0.3)
    ]


def test_limit_cuts_after_ordering_and_zero_gives_nothing() -> None:
    links = [(f"n{i}", LINK_TEMPORAL, i / 10) for i in range(10)]
    assert [n.neighbour_id for n in strongest_neighbours(links, exclude="a", limit=3)] == [
        "n9",
        "n8",
        "n7",
    ]
    assert strongest_neighbours(links, exclude="a", limit=0) == []
    with pytest.raises(ValueError):
        strongest_neighbours(links, exclude="a", limit=-1)


_link = st.tuples(
    st.sampled_from("abcdef"),
    st.sampled_from([LINK_TEMPORAL, LINK_SEMANTIC]),
    st.sampled_from([0.3, 0.5, 0.75, 0.9, 1.0]),
)


@given(st.lists(_link, max_size=30), st.integers(0, 8))
def test_strongest_neighbours_match_a_plain_reading_of_the_rule(links, limit) -> None:
    # Reference: for each neighbour, its maximum weight; semantic wins a tie; sort by
    # (weight desc, semantic first, id); drop the chunk itself; keep `limit`.
    best: dict[str, tuple[float, str]] = {}
    for nid, kind, w in links:
        if nid == "a":
            continue
        if nid not in best:
            best[nid] = (w, kind)
            continue
        held_w, held_kind = best[nid]
        if w > held_w or (w == held_w and kind == LINK_SEMANTIC):
            best[nid] = (w, kind)
    expected = sorted(
        best.items(), key=lambda kv: (-kv[1][0], 0 if kv[1][1] == LINK_SEMANTIC else 1, kv[0])
    )[:limit]
    got = strongest_neighbours(links, exclude="a", limit=limit)
    assert [(n.neighbour_id, n.link_kind, n.weight) for n in got] == [
        (nid, kind, w) for nid, (w, kind) in expected
    ]
