"""The bounded link passes against verbatim all-pairs references.

The two ``reference_*`` functions below are the straightforward all-pairs computations the
live passes must agree with. Keep them VERBATIM and never refactor them: they share no
code with ``neo_assets.links.rules.passes`` on purpose (not even the weight formula or the
constants). The moment a reference shares code with the live implementation, agreeing
with it proves nothing.
"""

import math
import random
from collections import Counter

import numpy as np
import pytest

from neo_assets.links.rules.passes import (
    LinkStats,
    link_stats,
    semantic_links,
    temporal_candidate_counts,
    temporal_links,
    temporal_weight,
)

# --- verbatim references: do not refactor, do not share code with the live passes ------


def reference_temporal_links(items, window_seconds=86400, per_chunk=20):
    units = []
    seen = set()
    for chunk_id, kind, changed_at in items:
        if chunk_id in seen:
            continue
        seen.add(chunk_id)
        units.append((chunk_id, kind, changed_at))
    links = {}
    for chunk_id, _kind, _changed_at in units:
        links[chunk_id] = []
    candidates = {}
    for chunk_id, _kind, _changed_at in units:
        candidates[chunk_id] = []
    for chunk_id, kind, changed_at in units:
        if not math.isfinite(changed_at):
            continue
        for other_id, other_kind, other_changed_at in units:
            if other_id == chunk_id:
                continue
            if other_kind != kind:
                continue
            if not math.isfinite(other_changed_at):
                continue
            gap = abs(float(changed_at) - float(other_changed_at))
            if gap <= window_seconds:
                weight = max(0.3, 1 - gap / window_seconds)
                candidates[chunk_id].append((other_id, weight, gap))
    for chunk_id in candidates:
        ranked = sorted(candidates[chunk_id], key=lambda c: (-c[1], c[2], c[0]))
        links[chunk_id] = [(other_id, weight) for other_id, weight, gap in ranked[:per_chunk]]
    return links


def reference_semantic_links(ids, vectors, threshold=0.7, top_k=20):
    vectors = np.asarray(vectors, dtype=np.float32)
    first_row = {}
    for row, chunk_id in enumerate(ids):
        if chunk_id not in first_row:
            first_row[chunk_id] = row
    links = {}
    for chunk_id in first_row:
        links[chunk_id] = []
    unit_ids = list(first_row)
    unit_rows = [first_row[chunk_id] for chunk_id in unit_ids]
    valid = []
    for index, row in enumerate(unit_rows):
        vector = vectors[row]
        if np.all(np.isfinite(vector)) and np.any(vector != 0):
            valid.append(index)
    normalized = np.zeros((len(unit_ids), vectors.shape[1]), dtype=np.float32)
    for index in valid:
        vector = vectors[unit_rows[index]]
        normalized[index] = vector / np.linalg.norm(vector)
    for i in valid:
        other_indices = [j for j in valid if unit_ids[j] != unit_ids[i]]
        if not other_indices:
            continue
        sims = normalized[other_indices] @ normalized[i]
        found = []
        for j, sim in zip(other_indices, sims, strict=True):
            if sim > threshold:
                found.append((unit_ids[j], float(sim)))
        found.sort(key=lambda c: (-c[1], c[0]))
        links[unit_ids[i]] = found[:top_k]
    return links


# --- helpers ------------------------------------------------------------------------------

HOUR = 3600.0
DAY = 86400.0


def weight_multisets(links):
    return {chunk: sorted(w for _, w in kept) for chunk, kept in links.items()}


def assert_temporal_links_are_genuine(items, links, per_chunk=20):
    """Every kept link is a real same-kind in-window pair with its own weight, listed best
    first — what weight-multiset equality alone would not show."""
    by_id = {}
    for chunk, kind, at in items:
        by_id.setdefault(chunk, (kind, at))
    for chunk, kept in links.items():
        assert len(kept) <= per_chunk
        assert len({other for other, _ in kept}) == len(kept)
        kind, at = by_id[chunk]
        keys = []
        for other, weight in kept:
            other_kind, other_at = by_id[other]
            assert other != chunk and other_kind == kind
            gap = abs(at - other_at)
            assert gap <= DAY
            assert weight == max(0.3, 1 - gap / DAY)
            keys.append((-weight, gap, other))
        assert keys == sorted(keys)


def random_temporal_batch(rng, n, kinds=("function", "class", "module")):
    """Times with many exact ties: identical stamps, the 0.3 clamp past ~16.8 h, the window
    edge, and sparse stretches."""
    base = 1_700_000_000.0
    anchors = [base + rng.choice((0, 1, 2, 3)) * DAY + rng.randrange(24) * HOUR for _ in range(4)]
    items = []
    for index in range(n):
        anchor = rng.choice(anchors)
        shape = rng.random()
        if shape < 0.3:
            at = anchor  # identical timestamps
        elif shape < 0.5:
            at = anchor + rng.choice((17, 18, 20, 23, 24)) * HOUR  # clamp zone, window edge
        elif shape < 0.7:
            at = anchor + rng.randrange(-6, 7) * 600.0  # on a 10-minute grid
        else:
            at = anchor + rng.uniform(-2 * DAY, 2 * DAY)
        kind = rng.choice(kinds[: rng.choice((1, 1, 2, 3))])
        items.append((f"c{rng.randrange(10**6):06d}-{index:04d}", kind, at))
    return items


# --- temporal -----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_temporal_weight_multisets_equal_the_all_pairs_reference(seed: int) -> None:
    rng = random.Random(seed)
    items = random_temporal_batch(rng, rng.choice((30, 60, 120, 250)))
    live = temporal_links(items)
    reference = reference_temporal_links(items)
    assert weight_multisets(live) == weight_multisets(reference)
    assert_temporal_links_are_genuine(items, live)


@pytest.mark.parametrize("seed", range(15))
def test_temporal_multisets_equal_with_a_small_cap_and_one_kind(seed: int) -> None:
    # One kind, per_chunk=3 and candidate_window=3: every chunk has far more in-window
    # neighbours than places, so the choice among candidates is exercised hard.
    rng = random.Random(1000 + seed)
    items = random_temporal_batch(rng, 80, kinds=("function",))
    live = temporal_links(items, per_chunk=3, candidate_window=3)
    reference = reference_temporal_links(items, per_chunk=3)
    assert weight_multisets(live) == weight_multisets(reference)
    assert_temporal_links_are_genuine(items, live, per_chunk=3)


@pytest.mark.parametrize("seed", range(15))
def test_under_21_same_kind_units_the_output_equals_the_reference_exactly(seed: int) -> None:
    rng = random.Random(2000 + seed)
    items = []
    for kind in ("function", "class"):
        items += [
            (chunk, kind, at)
            for chunk, _, at in random_temporal_batch(rng, rng.randint(1, 20), kinds=(kind,))
        ]
    assert temporal_links(items) == reference_temporal_links(items)


def test_at_21_identical_timestamps_the_window_still_covers_everything() -> None:
    # 21 units: every chunk's 20 others are within 20 sort positions, so even the id
    # tie-break among identical timestamps matches the reference exactly.
    items = [(f"t{(i * 8) % 21:02d}", "function", 1_700_000_000.0) for i in range(21)]
    assert len({chunk for chunk, _, _ in items}) == 21
    assert temporal_links(items) == reference_temporal_links(items)


def test_a_chunk_keeps_neighbours_on_both_sides_in_time() -> None:
    # 41 chunks one minute apart. The middle one's 20 best are the 10 nearest on each side.
    # Counting the budget while generating would fill it with the reverse links of its 20
    # predecessors before its own turn: only predecessors, a graph biased backwards.
    items = [(f"u{i:02d}", "function", 1_700_000_000.0 + 60.0 * i) for i in range(41)]
    live = temporal_links(items)
    middle = {other for other, _ in live["u20"]}
    assert middle == {f"u{i:02d}" for i in (*range(10, 20), *range(21, 31))}
    assert [w for _, w in live["u20"]] == sorted(
        [1 - 60.0 * d / DAY for d in range(1, 11)] * 2, reverse=True
    )
    assert live == reference_temporal_links(items)
    # The edges keep their 20 nearest, all on their one side.
    assert {other for other, _ in live["u00"]} == {f"u{i:02d}" for i in range(1, 21)}
    assert {other for other, _ in live["u40"]} == {f"u{i:02d}" for i in range(20, 40)}


def test_a_chunk_keeps_its_nearest_when_neighbours_crowd_one_side() -> None:
    # 30 chunks a second apart before the pivot, 5 a minute apart after it: the 20 best are
    # the 20 nearest predecessors, though half the candidate window points forward.
    base = 1_700_000_000.0
    items = [(f"p{i:02d}", "function", base - (30 - i)) for i in range(30)]
    items.append(("pivot", "function", base))
    items += [(f"s{i}", "function", base + 60.0 * (i + 1)) for i in range(5)]
    kept = temporal_links(items)["pivot"]
    assert {other for other, _ in kept} == {f"p{i:02d}" for i in range(10, 30)}
    assert weight_multisets({"pivot": kept}) == weight_multisets(
        {"pivot": reference_temporal_links(items)["pivot"]}
    )


def test_the_candidate_bound_holds_at_5000_identical_timestamps() -> None:
    items = [(f"id{i:05d}", "function", 1_700_000_000.0) for i in range(5000)]
    counts = temporal_candidate_counts(items)
    assert len(counts) == 5000
    # 20 successors and 20 predecessors for every chunk away from the two ends: exactly
    # the bound, never all 4,999 others.
    assert max(counts.values()) == 40
    assert Counter(counts.values())[40] == 5000 - 40
    assert counts["id00000"] == 20 and counts["id04999"] == 20
    links = temporal_links(items)
    assert all(len(kept) == 20 for kept in links.values())
    assert all(weight == 1.0 for kept in links.values() for _, weight in kept)
    # Ties resolve by id among the 40 nearest in sort order: the first chunk keeps the next 20.
    assert [other for other, _ in links["id00000"]] == [f"id{i:05d}" for i in range(1, 21)]


def test_candidate_counts_never_exceed_twice_the_window() -> None:
    rng = random.Random(7)
    items = random_temporal_batch(rng, 400, kinds=("function",))
    for window in (1, 5, 20):
        counts = temporal_candidate_counts(items, candidate_window=window)
        assert max(counts.values()) <= 2 * window


def test_temporal_weight_formula_and_window_edge() -> None:
    base = 1_700_000_000.0
    items = [
        ("a", "function", base),
        ("b", "function", base),  # same instant: weight 1
        ("c", "function", base + 12 * HOUR),  # 0.5
        ("d", "function", base + 20 * HOUR),  # past ~16.8 h: clamps to 0.3
        ("e", "function", base + DAY),  # exactly on the window edge: included, 0.3
        ("f", "function", base + DAY + 0.5),  # just outside
    ]
    kept = dict(temporal_links(items)["a"])
    assert kept == {"b": 1.0, "c": 0.5, "d": 0.3, "e": 0.3}
    assert temporal_weight(12 * HOUR) == 0.5
    assert temporal_weight(20 * HOUR) == 0.3
    assert temporal_weight(0.0) == 1.0


def test_temporal_ties_resolve_by_proximity_then_id() -> None:
    base = 1_700_000_000.0
    # 25 neighbours all past the clamp: equal weight 0.3, more than the 20 places.
    items = [("pivot", "function", base)]
    items += [(f"n{i:02d}", "function", base + 17 * HOUR + 60.0 * i) for i in range(25)]
    kept = temporal_links(items)["pivot"]
    assert [other for other, _ in kept] == [f"n{i:02d}" for i in range(20)]
    # Equal gap on both sides: the smaller id first.
    twins = [
        ("m", "function", base),
        ("z", "function", base - HOUR),
        ("y", "function", base + HOUR),
    ]
    assert [other for other, _ in temporal_links(twins)["m"]] == ["y", "z"]


def test_different_kinds_never_link() -> None:
    base = 1_700_000_000.0
    items = [("a", "function", base), ("b", "class", base), ("c", "function", base + 1)]
    links = temporal_links(items)
    assert links == {"a": [("c", 1 - 1 / DAY)], "b": [], "c": [("a", 1 - 1 / DAY)]}


def test_non_finite_times_never_link_and_duplicate_ids_are_one_chunk() -> None:
    base = 1_700_000_000.0
    items = [
        ("a", "function", base),
        ("nan", "function", math.nan),
        ("inf", "function", math.inf),
        ("a", "function", base + 10),  # a repeat of "a": ignored, never its own neighbour
        ("b", "function", base + 60),
    ]
    links = temporal_links(items)
    assert links == {
        "a": [("b", 1 - 60 / DAY)],
        "nan": [],
        "inf": [],
        "b": [("a", 1 - 60 / DAY)],
    }
    assert links == reference_temporal_links(items)
    assert temporal_candidate_counts(items) == {"a": 1, "nan": 0, "inf": 0, "b": 1}


def test_temporal_empty_and_single() -> None:
    assert temporal_links([]) == {}
    assert temporal_links([("a", "function", 0.0)]) == {"a": []}
    assert temporal_candidate_counts([]) == {}


def test_temporal_rejects_a_candidate_window_narrower_than_the_cap() -> None:
    with pytest.raises(ValueError, match="candidate_window"):
        temporal_links([], per_chunk=21, candidate_window=20)
    with pytest.raises(ValueError, match="window_seconds"):
        temporal_links([], window_seconds=0)
    with pytest.raises(ValueError, match="window_seconds"):
        temporal_candidate_counts([], window_seconds=math.inf)


# --- semantic -----------------------------------------------------------------------------


def lattice_batch(rng: np.random.Generator, n: int, dims: int = 16) -> np.ndarray:
    """±1 vectors (norm 4) made from a few bases by flipping a few signs, some scaled by an
    integer: normalisation and every dot product are exact in float32 whatever the
    summation order, so live and reference must agree bit for bit, and similarities tie
    often (0.875 for one flip, 0.75 for two, ...)."""
    bases = rng.choice((-1.0, 1.0), size=(max(1, n // 12), dims))
    out = np.empty((n, dims), dtype=np.float32)
    for row in range(n):
        vector = bases[rng.integers(len(bases))].copy()
        flips = rng.choice(dims, size=int(rng.integers(0, 5)), replace=False)
        vector[flips] *= -1
        out[row] = vector * float(rng.choice((1, 1, 2, 3, 5)))
    return out


def semantic_ids(rng: np.random.Generator, n: int) -> list[str]:
    # Random names, so id order and row order disagree and the tie-break is exercised.
    return [f"s{int(rng.integers(10**6)):06d}-{row:04d}" for row in range(n)]


@pytest.mark.parametrize("seed", range(30))
def test_semantic_equals_the_all_pairs_reference_on_random_batches(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.choice((20, 45, 97, 150)))
    ids = semantic_ids(rng, n)
    vectors = lattice_batch(rng, n)
    for row in rng.choice(n, size=3, replace=False):
        vectors[row] = (0.0, math.nan, math.inf)[int(rng.integers(3))]
    top_k = int(rng.choice((1, 3, 5, 20)))
    threshold = float(rng.choice((0.7, 0.75, 0.5)))
    live = semantic_links(ids, vectors, threshold=threshold, top_k=top_k, block_rows=16)
    reference = reference_semantic_links(ids, vectors, threshold=threshold, top_k=top_k)
    assert weight_multisets(live) == weight_multisets(reference)
    assert live == reference


@pytest.mark.parametrize("block_rows", [1, 3, 7, 22, 23, 24, 256])
def test_semantic_is_the_same_across_block_boundaries(block_rows: int) -> None:
    rng = np.random.default_rng(99)
    n = 23  # a multiple of none of the small block sizes
    ids = semantic_ids(rng, n)
    vectors = lattice_batch(rng, n)
    vectors[5] = 0.0
    live = semantic_links(ids, vectors, threshold=0.6, top_k=4, block_rows=block_rows)
    assert live == reference_semantic_links(ids, vectors, threshold=0.6, top_k=4)


@pytest.mark.parametrize("seed", range(5))
def test_semantic_on_generic_float_vectors_matches_the_reference(seed: int) -> None:
    # Arbitrary floats: the block product and the per-unit product may differ in the last
    # bit, so weights compare to a tolerance, and two neighbours may only trade places (or
    # trade the last place) when their similarities are that close.
    rng = np.random.default_rng(500 + seed)
    n, dims, tol = 120, 48, 1e-5
    centers = rng.standard_normal((8, dims))
    vectors = (centers[rng.integers(8, size=n)] + 0.6 * rng.standard_normal((n, dims))).astype(
        np.float32
    )
    ids = semantic_ids(rng, n)
    live = semantic_links(ids, vectors, top_k=10, block_rows=7)
    reference = reference_semantic_links(ids, vectors, top_k=10)
    assert sum(len(kept) for kept in live.values()) > n  # the clusters do link
    assert live.keys() == reference.keys()
    for chunk in live:
        live_w = [w for _, w in live[chunk]]
        ref_w = [w for _, w in reference[chunk]]
        assert len(live_w) == len(ref_w)
        np.testing.assert_allclose(live_w, ref_w, rtol=0, atol=tol)
        traded = {o for o, _ in live[chunk]} ^ {o for o, _ in reference[chunk]}
        assert all(abs(w - ref_w[-1]) < tol for o, w in live[chunk] if o in traded)
        assert chunk not in {o for o, _ in live[chunk]}


@pytest.mark.parametrize("top_k", [1, 2, 5, 30])
def test_semantic_crowded_and_sparse_blocks_equal_the_reference(top_k: int) -> None:
    # One base vector and one- or two-flip variants: every pair passes a 0.5 threshold, so
    # small top_k takes the crowded path (cut rows to their k best first); top_k=30 the
    # plain one. Either way, exactly the reference.
    rng = np.random.default_rng(top_k)
    base = rng.choice((-1.0, 1.0), size=16)
    vectors = np.tile(base, (60, 1)).astype(np.float32)
    for row in range(60):
        vectors[row, rng.choice(16, size=int(rng.integers(0, 3)), replace=False)] *= -1
    ids = semantic_ids(rng, 60)
    live = semantic_links(ids, vectors, threshold=0.5, top_k=top_k, block_rows=7)
    assert live == reference_semantic_links(ids, vectors, threshold=0.5, top_k=top_k)
    assert all(len(kept) == min(top_k, 59) for kept in live.values())


def test_invalid_vectors_never_link_and_are_never_linked_to() -> None:
    ids = ["ok1", "zero", "nan", "inf", "ok2", "neginf", "allnan", "ok3"]
    good = np.ones(4, dtype=np.float32)
    vectors = np.stack(
        [
            good,
            np.zeros(4),
            [1.0, math.nan, 1.0, 1.0],
            [1.0, math.inf, 1.0, 1.0],
            good * 2,
            [-math.inf, 1.0, 1.0, 1.0],
            [math.nan] * 4,
            good * 3,
        ]
    ).astype(np.float32)
    links = semantic_links(ids, vectors)
    invalid = {"zero", "nan", "inf", "neginf", "allnan"}
    for chunk in invalid:
        assert links[chunk] == []
    assert all(other not in invalid for kept in links.values() for other, _ in kept)
    assert {other for other, _ in links["ok1"]} == {"ok2", "ok3"}
    assert links == reference_semantic_links(ids, vectors)


def test_a_chunk_never_links_to_itself_nor_to_a_repeat_of_its_id() -> None:
    ones = np.ones(16, dtype=np.float32)
    flipped = ones.copy()
    flipped[0] = -1  # similarity 0.875 to ones, exact
    other = np.zeros(16, dtype=np.float32)
    other[3] = 1.0  # similarity 0.25 to ones
    vectors = np.stack([ones, ones, flipped, other])
    links = semantic_links(["a", "a", "b", "c"], vectors)
    assert set(links) == {"a", "b", "c"}
    assert [other for other, _ in links["a"]] == ["b"]
    assert [other for other, _ in links["b"]] == ["a"]
    assert links["c"] == []
    assert all(other != chunk for chunk, kept in links.items() for other, _ in kept)
    assert links == reference_semantic_links(["a", "a", "b", "c"], vectors)


def test_identical_vectors_under_different_ids_do_link() -> None:
    vectors = np.tile(np.array([[3.0, 4.0]], dtype=np.float32), (3, 1))
    links = semantic_links(["x", "y", "z"], vectors)
    assert links == {"x": [("y", 1.0), ("z", 1.0)], "y": [("x", 1.0), ("z", 1.0)],
                     "z": [("x", 1.0), ("y", 1.0)]}  # fmt: skip


def test_the_threshold_is_strict() -> None:
    # Two sign flips out of 16: similarity exactly 0.75.
    a = np.ones(16, dtype=np.float32)
    b = a.copy()
    b[:2] = -1
    vectors = np.stack([a, b])
    assert semantic_links(["a", "b"], vectors, threshold=0.75) == {"a": [], "b": []}
    assert semantic_links(["a", "b"], vectors, threshold=0.7499) == {
        "a": [("b", 0.75)],
        "b": [("a", 0.75)],
    }


def test_semantic_top_k_ties_resolve_by_id() -> None:
    pivot = np.ones(16, dtype=np.float32)
    rows = [pivot]
    for i in range(6):  # six neighbours, each one flip away: all exactly 0.875
        row = pivot.copy()
        row[i] = -1
        rows.append(row)
    ids = ["p", "f", "b", "e", "a", "d", "c"]
    kept = semantic_links(ids, np.stack(rows), top_k=3)["p"]
    assert kept == [("a", 0.875), ("b", 0.875), ("c", 0.875)]


def test_tiny_and_huge_vectors_are_valid() -> None:
    direction = np.array([1.0, 2.0, 2.0], dtype=np.float32)
    vectors = np.stack([direction * 1e-30, direction * 1e30, direction]).astype(np.float32)
    links = semantic_links(["tiny", "huge", "one"], vectors)
    assert {other for other, _ in links["tiny"]} == {"huge", "one"}
    assert all(abs(w - 1.0) < 1e-6 for kept in links.values() for _, w in kept)


def test_semantic_edge_shapes_and_arguments() -> None:
    assert semantic_links([], np.zeros((0, 4), dtype=np.float32)) == {}
    assert semantic_links(["a"], np.ones((1, 4), dtype=np.float32)) == {"a": []}
    assert semantic_links(["a", "b"], np.ones((2, 4)), top_k=0) == {"a": [], "b": []}
    with pytest.raises(ValueError, match="shape"):
        semantic_links(["a", "b"], np.ones((3, 4)))
    with pytest.raises(ValueError, match="shape"):
        semantic_links(["a"], np.ones(4))
    with pytest.raises(ValueError, match="threshold"):
        semantic_links(["a"], np.ones((1, 4)), threshold=math.nan)
    with pytest.raises(ValueError, match="block_rows"):
        semantic_links(["a"], np.ones((1, 4)), block_rows=0)


def test_link_stats() -> None:
    links = {"a": [("b", 0.9), ("c", 0.8)], "b": [("a", 0.9)], "c": []}
    assert link_stats(links) == LinkStats(chunks=3, linked_chunks=2, links=3, max_links_per_chunk=2)
    assert link_stats({}) == LinkStats(chunks=0, linked_chunks=0, links=0, max_links_per_chunk=0)
