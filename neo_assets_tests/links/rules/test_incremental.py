"""The incremental link rules against the full passes they replace.

Every test compares with ``links.rules`` over the final rows and asserts EXACT equality
(weights included). The semantic vectors are chosen so that float32 arithmetic is exact:
16 dimensions, entries 0, +-1 or +-2 with squares summing to 16, so each row's norm is 4,
the normalised entries are multiples of 1/4 and every dot product is a multiple of 1/16
whatever order BLAS sums it in. With such vectors the full pass is a function of the rows
alone, so "equal to the full pass" is a well-posed claim bit for bit; the many exact ties
(weights on a 1/16 grid, duplicate vectors, pairs exactly at the threshold) exercise the
tie-break and threshold rules.
"""

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neo_assets.links.rules.incremental import (
    semantic_links_update,
    semantic_update,
    temporal_changes,
)
from neo_assets.links.rules.lists import LinkLists
from neo_assets.links.rules.passes import LinkPairs, semantic_links, temporal_links

DIMS = 16


def exact_vector(rng: random.Random, centre: list[int] | None = None) -> list[float]:
    """A vector whose float32 products are exact (see the module docstring): a centre's
    signs flipped at a few places, or a fresh composition of twos and ones."""
    if centre is not None and rng.random() < 0.8:
        out = list(centre)
        for place in rng.sample(range(DIMS), rng.choice([0, 0, 1, 1, 2, 3])):
            out[place] = -out[place]
        return [float(x) for x in out]
    if rng.random() < 0.05:
        return [0.0] * DIMS  # invalid: never links
    twos = rng.randint(0, 4)
    values = [2] * twos + [1] * (16 - 4 * twos)
    values += [0] * (DIMS - len(values))
    rng.shuffle(values)
    return [float(v * rng.choice((-1, 1))) for v in values]


class Rows:
    """A pool of distinct chunk ids with fixed vectors (an id never changes its vector)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.centres = [[int(x) for x in exact_vector(self.rng)] for _ in range(3)]
        self.vectors: dict[str, list[float]] = {}

    def new(self) -> str:
        chunk = f"c{self.rng.randrange(10**6):06d}"
        while chunk in self.vectors:
            chunk = f"c{self.rng.randrange(10**6):06d}"
        centre = self.rng.choice(self.centres) if self.rng.random() < 0.9 else None
        self.vectors[chunk] = exact_vector(self.rng, centre)
        return chunk

    def matrix(self, ids: list[str]) -> np.ndarray:
        return np.asarray([self.vectors[c] for c in ids], dtype=np.float32).reshape(-1, DIMS)


def test_the_test_vectors_make_float32_products_exact() -> None:
    rows = Rows(1)
    ids = [rows.new() for _ in range(300)]
    m = rows.matrix(ids)
    valid = np.linalg.norm(m, axis=1) > 0
    unit = m[valid] / np.float32(4.0)
    assert np.all(np.linalg.norm(m[valid].astype(np.float64), axis=1) == 4.0)
    blocked = np.vstack([unit[s : s + 7] @ unit.T for s in range(0, len(unit), 7)])
    assert np.array_equal(blocked, unit @ unit.T)
    assert np.array_equal(blocked, unit.astype(np.float64) @ unit.T.astype(np.float64))


PARAMS = st.fixed_dictionaries(
    {
        "threshold": st.sampled_from([0.7, 0.75, 0.5, 0.0, -1.0]),
        "top_k": st.integers(0, 5),
        "block_rows": st.integers(1, 4),
    }
)


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    start=st.integers(0, 30),
    steps=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=6),
    params=PARAMS,
)
def test_random_add_remove_sequences_give_exactly_the_full_pass(
    seed: int, start: int, steps: list[tuple[int, int]], params: dict
) -> None:
    rows = Rows(seed)
    rng = random.Random(seed ^ 0x5EED)
    ids = [rows.new() for _ in range(start)]
    links = semantic_links(ids, rows.matrix(ids), **params)
    for removing, adding in steps:
        gone = set(rng.sample(ids, min(removing, len(ids))))
        before = ids
        ids = [c for c in ids if c not in gone] + [rows.new() for _ in range(adding)]
        rng.shuffle(ids)
        links = semantic_links_update(links, before, ids, rows.matrix(ids), **params)
        assert links == semantic_links(ids, rows.matrix(ids), **params)


def test_a_full_list_that_loses_a_neighbour_is_recomputed_a_short_one_only_drops_it() -> None:
    # a's candidates, best first: b (1.0), c (0.875), d (0.75). top_k = 2 cuts d.
    base = [1.0] * 16
    near = [1.0] * 15 + [-1.0]  # 14/16 = 0.875 with base
    mid = [1.0] * 14 + [-1.0] * 2  # 12/16 = 0.75 with base
    vectors = {"a": base, "b": base, "c": near, "d": mid}
    ids = list(vectors)
    m = np.asarray([vectors[c] for c in ids], dtype=np.float32)
    full = semantic_links(ids, m, threshold=0.7, top_k=2)
    assert full["a"] == [("b", 1.0), ("c", 0.875)]
    kept = ["a", "c", "d"]  # b leaves: a's list was full, d moves up from below the cut
    m2 = np.asarray([vectors[c] for c in kept], dtype=np.float32)
    update = semantic_links_update(full, ids, kept, m2, threshold=0.7, top_k=2, block_rows=2)
    assert update["a"] == [("c", 0.875), ("d", 0.75)]
    assert update == semantic_links(kept, m2, threshold=0.7, top_k=2)

    # With top_k = 4 no list is full, nothing is below a cut: the lists only drop b.
    full4 = semantic_links(ids, m, threshold=0.7, top_k=4)
    index = {c: i for i, c in enumerate(kept)}
    previous = LinkLists.from_rows([[(index.get(n, -1), w) for n, w in full4[c]] for c in kept])
    step = semantic_update(
        kept, m2, previous, np.zeros(3, dtype=bool), threshold=0.7, top_k=4, block_rows=2
    )
    assert step.recomputed == 0
    assert step.replaced[0] == [(1, 0.875), (2, 0.75)]
    lists = {c: [(kept[n], w) for n, w in step.replaced.get(i, previous.row(i))]
             for i, c in enumerate(kept)}  # fmt: skip
    assert lists == semantic_links(kept, m2, threshold=0.7, top_k=4)


def test_an_unchanged_chunk_takes_an_added_chunk_only_where_it_beats_the_cut() -> None:
    base = [1.0] * 16
    at_075 = [1.0] * 14 + [-1.0] * 2  # 12/16 = 0.75 with base
    vectors = {"a": base, "c": [1.0] * 15 + [-1.0], "d": at_075}  # c: 0.875
    ids = list(vectors)
    m = np.asarray(list(vectors.values()), dtype=np.float32)
    before = semantic_links(ids, m, threshold=0.7, top_k=2)
    assert before["a"] == [("c", 0.875), ("d", 0.75)]
    # Two added chunks tie d's weight: "b" has the smaller id and takes d's place, "e" the
    # larger and stays below the cut.
    vectors["b"] = [1.0] * 13 + [-1.0] * 2 + [1.0]
    vectors["e"] = [-1.0] + [1.0] * 14 + [-1.0]
    after_ids = list(vectors)
    m2 = np.asarray(list(vectors.values()), dtype=np.float32)
    update = semantic_links_update(
        before, ids, after_ids, m2, threshold=0.7, top_k=2, block_rows=256
    )
    assert update["a"] == [("c", 0.875), ("b", 0.75)]
    assert update == semantic_links(after_ids, m2, threshold=0.7, top_k=2)


def test_unchanged_rows_far_from_the_change_are_left_alone() -> None:
    rows = Rows(7)
    ids = [rows.new() for _ in range(200)]
    links = semantic_links(ids, rows.matrix(ids), threshold=0.7, top_k=3)
    new = rows.new()
    after = [*ids, new]
    index = {c: i for i, c in enumerate(after)}
    previous = LinkLists.from_rows([[(index[n], w) for n, w in links.get(c, [])] for c in after])
    added = np.zeros(len(after), dtype=bool)
    added[-1] = True
    step = semantic_update(
        after, rows.matrix(after), previous, added, threshold=0.7, top_k=3, block_rows=64
    )
    assert step.recomputed == 1  # only the added row gets a full row
    assert len(step.replaced) < 60  # the rest merged at most one candidate each
    full = semantic_links(after, rows.matrix(after), threshold=0.7, top_k=3)
    merged = {c: [(after[n], w) for n, w in step.replaced.get(i, previous.row(i))]
              for i, c in enumerate(after)}  # fmt: skip
    assert merged == full


def test_semantic_update_refuses_duplicate_ids_and_bad_shapes() -> None:
    m = np.ones((2, 4), dtype=np.float32)
    empty = LinkLists.empty(2)
    no = np.zeros(2, dtype=bool)
    with pytest.raises(ValueError, match="distinct"):
        semantic_update(["a", "a"], m, empty, no, threshold=0.7, top_k=2, block_rows=4)
    with pytest.raises(ValueError, match="cover"):
        semantic_update(["a", "b"], m, LinkLists.empty(3), no, threshold=0.7, top_k=2, block_rows=4)
    with pytest.raises(ValueError, match="vectors"):
        semantic_update(["a"], m, empty, no, threshold=0.7, top_k=2, block_rows=4)


# --- LinkLists ---------------------------------------------------------------------------


def test_link_lists_round_trip_and_patch() -> None:
    links = {"a": [("b", 0.9), ("c", 0.8)], "b": [], "c": [("a", 0.5)]}
    lists = LinkLists.from_links(links, ["a", "b", "c"])
    assert lists.is_well_formed(3) and lists.to_links(["a", "b", "c"]) == links
    # New rows: c, d, a (b left). a's list must be replaced since it names b.
    patched = lists.patch(
        source=np.array([2, -1, 0]),
        remap=np.array([2, -1, 0]),
        replaced={2: [(0, 0.8)], 1: [(2, 0.4)]},
    )
    assert patched.to_links(["c", "d", "a"]) == {
        "c": [("a", 0.5)],
        "d": [("a", 0.4)],
        "a": [("c", 0.8)],
    }
    with pytest.raises(ValueError, match="left"):
        lists.patch(source=np.array([2, -1, 0]), remap=np.array([2, -1, 0]), replaced={})
    with pytest.raises(ValueError, match="neighbour"):
        LinkLists.from_links({"a": [("zz", 0.1)]}, ["a"])
    assert not LinkLists(np.array([0, 2]), np.array([0, 5]), np.array([0.1, 0.2])).is_well_formed(1)


def test_link_lists_from_pairs_and_read_as_links() -> None:
    pairs = LinkPairs.grouped(
        np.array([2, 0, 0, 2]), np.array([0, 1, 2, 1]), np.array([0.5, 0.9, 0.8, 0.4])
    )
    lists = LinkLists.from_pairs(3, pairs)
    ids = ["a", "b", "c"]
    links = {"a": [("b", 0.9), ("c", 0.8)], "b": [], "c": [("a", 0.5), ("b", 0.4)]}
    assert lists.is_well_formed(3) and lists.to_links(ids) == links
    view = lists.as_links(ids)
    assert (
        dict(view) == links
        and dict(view.items()) == links
        and list(view.lists()) == list(links.items())
    )
    assert view["c"] == links["c"] and len(view) == 3 and "b" in view and "z" not in view
    with pytest.raises(KeyError):
        view["z"]
    with pytest.raises(ValueError, match="ids for"):
        lists.as_links(["a", "b"])
    with pytest.raises(ValueError, match="outside"):
        LinkLists.from_pairs(2, pairs)
    assert LinkLists.from_pairs(4, LinkPairs.concat([])).to_links([*ids, "d"]) == {
        **dict.fromkeys([*ids, "d"], [])
    }


# --- temporal ----------------------------------------------------------------------------

KINDS = ("function", "class")


def _item(rng: random.Random, chunk: str) -> tuple[str, str, float]:
    at = rng.choice([0.0, 0.0, 60.0, 3600.0, 50_000.0, 90_000.0, 200_000.0, math.nan])
    return (chunk, rng.choice(KINDS), 1_700_000_000.0 + at if math.isfinite(at) else at)


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    start=st.integers(0, 40),
    steps=st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=5
    ),
    per_chunk=st.integers(0, 3),
    extra=st.integers(0, 2),
    window=st.sampled_from([86_400.0, 3600.0, 1.0]),
)
def test_random_add_remove_retime_sequences_give_exactly_the_full_temporal_pass(
    seed: int,
    start: int,
    steps: list[tuple[int, int, int]],
    per_chunk: int,
    extra: int,
    window: float,
) -> None:
    rng = random.Random(seed)
    params = {
        "window_seconds": window,
        "per_chunk": per_chunk,
        "candidate_window": per_chunk + extra,
    }
    counter = iter(range(10**9))
    items = [_item(rng, f"t{next(counter):05d}") for _ in range(start)]
    links = temporal_links(items, **params)
    for removing, adding, retiming in steps:
        before = items
        gone = set(rng.sample([c for c, _, _ in items], min(removing, len(items))))
        items = [it for it in items if it[0] not in gone]
        for place in rng.sample(range(len(items)), min(retiming, len(items))):
            chunk, kind, _ = items[place]
            items[place] = (chunk, kind, _item(rng, chunk)[2])
        items += [_item(rng, f"t{next(counter):05d}") for _ in range(adding)]
        rng.shuffle(items)
        changes = temporal_changes(before, items, **params)
        links = {c: changes[c] if c in changes else links[c] for c, _, _ in items}
        assert links == temporal_links(items, **params)


def test_a_retimed_chunk_touches_only_its_old_and_new_neighbourhoods() -> None:
    # 300 chunks a minute apart: moving one changes lists only near where it was and is.
    items = [(f"t{i:04d}", "function", 1_700_000_000.0 + 60.0 * i) for i in range(300)]
    params = {"window_seconds": 86_400.0, "per_chunk": 3, "candidate_window": 3}
    links = temporal_links(items, **params)
    moved = list(items)
    moved[100] = ("t0100", "function", 1_700_000_000.0 + 60.0 * 250.5)
    changes = temporal_changes(items, moved, **params)
    assert len(changes) <= 2 * (2 * 3 + 1)
    assert {c: changes.get(c, links[c]) for c, _, _ in moved} == temporal_links(moved, **params)
