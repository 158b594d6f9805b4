"""Related-chunk links: the bounded temporal and semantic passes over one generation, equal
to the all-pairs computation without its memory (the tests pin both against verbatim
references). A repeated chunk id is one chunk; lists are best first; links are directed.
Design: docs/design/links.md#passes"""

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack

import numpy as np

TEMPORAL_WINDOW_SECONDS = 86_400.0
TEMPORAL_WEIGHT_FLOOR = 0.3
TEMPORAL_PER_CHUNK = 20
TEMPORAL_CANDIDATE_WINDOW = 20
SEMANTIC_THRESHOLD = 0.7
SEMANTIC_TOP_K = 20
SEMANTIC_BLOCK_ROWS = 256
_UNIT_BLOCK_ROWS = 4096  # rows scaled at a time (unit_rows)
# Above this many passing pairs per row on average, cut rows to their k best before sorting.
_CROWDED = 4

Links = dict[str, list[tuple[str, float]]]


@dataclass(frozen=True)
class LinkStats:
    """A pass's output in figures: for asset metadata and logs."""

    chunks: int
    linked_chunks: int
    links: int
    max_links_per_chunk: int


@dataclass(frozen=True)
class LinkPairs:
    """A pass's kept links over row indices (the rows: the pass's distinct chunk ids):
    ``src`` ascending, each row's links best first, as ``Links`` lists them."""

    src: np.ndarray  # int64
    dst: np.ndarray  # int64
    weight: np.ndarray  # float64 (a semantic weight is a float32 similarity, exactly)

    @classmethod
    def grouped(cls, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> "LinkPairs":
        """Pairs whose order is best first within each source row, grouped by row (a
        stable sort keeps each row's order)."""
        order = np.argsort(src, kind="stable")
        return cls(
            src[order].astype(np.int64, copy=False),
            dst[order].astype(np.int64, copy=False),
            weight[order].astype(np.float64, copy=False),
        )

    @classmethod
    def concat(cls, parts: Sequence["LinkPairs"]) -> "LinkPairs":
        """Several passes' pairs over disjoint source rows, as one."""
        if not parts:
            return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))
        return cls.grouped(
            np.concatenate([p.src for p in parts]),
            np.concatenate([p.dst for p in parts]),
            np.concatenate([p.weight for p in parts]),
        )


def pairs_to_links(ids: Sequence[str], pairs: LinkPairs) -> Links:
    """``pairs`` keyed by chunk id: one key per id, in order, ``[]`` without a link."""
    links: Links = {chunk: [] for chunk in ids}
    for s, d, w in zip(pairs.src.tolist(), pairs.dst.tolist(), pairs.weight.tolist(), strict=True):
        links[ids[s]].append((ids[d], w))
    return links


def link_stats(links: Mapping[str, Sequence[tuple[str, float]]]) -> LinkStats:
    """Summarise the output of either pass."""
    sizes = [len(kept) for kept in links.values()]
    return LinkStats(
        chunks=len(sizes),
        linked_chunks=sum(1 for size in sizes if size),
        links=sum(sizes),
        max_links_per_chunk=max(sizes, default=0),
    )


def temporal_weight(gap_seconds: float, window_seconds: float = TEMPORAL_WINDOW_SECONDS) -> float:
    """``max(0.3, 1 - gap / window)``: the weight of one in-window pair, for callers and
    readers. The passes compute the same expression vectorised."""
    return max(TEMPORAL_WEIGHT_FLOOR, 1.0 - gap_seconds / window_seconds)


# --- temporal ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _TemporalCandidates:
    """Directed candidate links in sorted-position space (see ``_temporal_candidates``)."""

    ids: list[str]  # every distinct chunk id, input order
    sorted_ids: list[str]  # the chunks with a finite time, by (kind, time, id)
    sorted_rows: np.ndarray  # index in ids of sorted_ids[p]
    id_rank: np.ndarray  # rank of sorted_ids[p] among sorted_ids by plain string order
    src: np.ndarray  # sorted positions
    dst: np.ndarray
    gap: np.ndarray  # seconds, float64, >= 0


def _check_temporal_args(window_seconds: float, candidate_window: int) -> None:
    if not (math.isfinite(window_seconds) and window_seconds > 0):
        raise ValueError(f"window_seconds must be finite and > 0, got {window_seconds!r}")
    if candidate_window < 0:
        raise ValueError(f"candidate_window must be >= 0, got {candidate_window!r}")


def _temporal_candidates(
    items: Sequence[tuple[str, str, float]],
    window_seconds: float,
    candidate_window: int,
) -> _TemporalCandidates:
    """Each chunk's nearest neighbours in time, never all pairs: at most
    ``2 * candidate_window`` candidates each, within its kind. Chunks with a non-finite time
    never link."""
    first: dict[str, tuple[str, float]] = {}
    for chunk, kind, changed_at in items:
        if chunk not in first:
            first[chunk] = (kind, float(changed_at))
    ids = list(first)
    timed: list[tuple[str, str, float]] = []
    timed_rows: list[int] = []
    for row, (chunk, (kind, at)) in enumerate(first.items()):
        if math.isfinite(at):
            timed.append((chunk, kind, at))
            timed_rows.append(row)

    kind_codes: dict[str, int] = {}
    kinds = np.fromiter(
        (kind_codes.setdefault(kind, len(kind_codes)) for _, kind, _ in timed),
        dtype=np.int64,
        count=len(timed),
    )
    times = np.fromiter((at for _, _, at in timed), dtype=np.float64, count=len(timed))
    rank = np.empty(len(timed), dtype=np.int64)
    rank[sorted(range(len(timed)), key=lambda i: timed[i][0])] = np.arange(len(timed))

    order = np.lexsort((rank, times, kinds))
    kinds, times, rank = kinds[order], times[order], rank[order]
    sorted_ids = [timed[i][0] for i in order.tolist()]
    sorted_rows = np.asarray(timed_rows, dtype=np.int64)[order]

    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    gaps: list[np.ndarray] = []
    positions = np.arange(len(timed), dtype=np.int64)
    for offset in range(1, min(candidate_window, len(timed) - 1) + 1):
        gap = times[offset:] - times[:-offset]
        inside = (kinds[offset:] == kinds[:-offset]) & (gap <= window_seconds)
        start = positions[:-offset][inside]
        starts.append(start)
        ends.append(start + offset)
        gaps.append(gap[inside])
    start = np.concatenate(starts) if starts else positions[:0]
    end = np.concatenate(ends) if ends else positions[:0]
    gap = np.concatenate(gaps) if gaps else np.empty(0, dtype=np.float64)
    # Each pair writes its reverse link too: that is how a chunk hears its predecessors.
    return _TemporalCandidates(
        ids=ids,
        sorted_ids=sorted_ids,
        sorted_rows=sorted_rows,
        id_rank=rank,
        src=np.concatenate((start, end)),
        dst=np.concatenate((end, start)),
        gap=np.concatenate((gap, gap)),
    )


def temporal_candidate_counts(
    items: Sequence[tuple[str, str, float]],
    *,
    window_seconds: float = TEMPORAL_WINDOW_SECONDS,
    candidate_window: int = TEMPORAL_CANDIDATE_WINDOW,
) -> dict[str, int]:
    """How many candidate links each chunk gets before the cap (at most
    ``2 * candidate_window``): the bound the temporal pass rests on, exposed for tests and
    metadata."""
    _check_temporal_args(window_seconds, candidate_window)
    cands = _temporal_candidates(items, window_seconds, candidate_window)
    counts = dict.fromkeys(cands.ids, 0)
    per_position = np.bincount(cands.src, minlength=len(cands.sorted_ids))
    for chunk, count in zip(cands.sorted_ids, per_position.tolist(), strict=True):
        counts[chunk] = count
    return counts


class TemporalOptions(TypedDict, total=False):
    """``temporal_pairs``' keyword arguments, for the forms that pass them on."""

    window_seconds: float
    per_chunk: int
    candidate_window: int


def temporal_links(
    items: Sequence[tuple[str, str, float]], **options: Unpack[TemporalOptions]
) -> Links:
    """Links between chunks of the same kind changed within ``window_seconds`` of each other
    (``items``: ``(chunk_id, kind, changed_at)``), weighing ``max(0.3, 1 - gap/window)``. Each
    keeps its ``per_chunk`` best: weight, then nearer in time, then smaller id. Why the bounded
    candidates hold them: docs/design/links.md#passes"""
    return pairs_to_links(*temporal_pairs(items, **options))


def temporal_pairs(
    items: Sequence[tuple[str, str, float]],
    *,
    window_seconds: float = TEMPORAL_WINDOW_SECONDS,
    per_chunk: int = TEMPORAL_PER_CHUNK,
    candidate_window: int = TEMPORAL_CANDIDATE_WINDOW,
) -> tuple[list[str], LinkPairs]:
    """``temporal_links`` as arrays: the distinct chunk ids (input order) and the kept
    links over their indices (``LinkPairs``). What a repo-sized run uses: no tuple per
    link."""
    _check_temporal_args(window_seconds, candidate_window)
    if not 0 <= per_chunk <= candidate_window:
        raise ValueError(
            f"need 0 <= per_chunk <= candidate_window, got {per_chunk!r} > {candidate_window!r}:"
            " a narrower candidate window could miss a chunk's best links"
        )
    cands = _temporal_candidates(items, window_seconds, candidate_window)
    weight = np.maximum(TEMPORAL_WEIGHT_FLOOR, 1.0 - cands.gap / window_seconds)
    # lexsort: last key is primary. Per chunk: weight desc, gap asc, neighbour id asc.
    order = np.lexsort((cands.id_rank[cands.dst], cands.gap, -weight, cands.src))
    src, dst, weight = cands.src[order], cands.dst[order], weight[order]
    place = np.arange(len(src)) - np.searchsorted(src, src, side="left")
    keep = place < per_chunk
    rows = cands.sorted_rows
    return cands.ids, LinkPairs.grouped(rows[src[keep]], rows[dst[keep]], weight[keep])


# --- semantic ---------------------------------------------------------------------------


class SemanticOptions(TypedDict, total=False):
    """``semantic_pairs``' keyword arguments, for the forms that pass them on."""

    threshold: float
    top_k: int
    block_rows: int


def semantic_links(
    ids: Sequence[str], vectors: np.ndarray, **options: Unpack[SemanticOptions]
) -> Links:
    """Links between chunks whose cosine similarity is strictly above ``threshold``; each keeps
    its ``top_k`` most similar, ties by smaller id. An all-zero or non-finite row never links;
    computed ``block_rows`` rows at a time, so memory is one block, not a copy per chunk."""
    return pairs_to_links(*semantic_pairs(ids, vectors, **options))


def semantic_pairs(
    ids: Sequence[str],
    vectors: np.ndarray,
    *,
    threshold: float = SEMANTIC_THRESHOLD,
    top_k: int = SEMANTIC_TOP_K,
    block_rows: int = SEMANTIC_BLOCK_ROWS,
    on_block: Callable[[int, int], None] | None = None,
) -> tuple[list[str], LinkPairs]:
    """``semantic_links`` as arrays: the distinct chunk ids (input order) and the kept
    links over their indices (``LinkPairs``). ``on_block(rows done, rows)`` is told after
    each block (the pass's progress; it does not change the result)."""
    matrix = check_semantic_args(ids, vectors, threshold, top_k, block_rows)

    first: dict[str, int] = {}
    for row, chunk in enumerate(ids):
        first.setdefault(chunk, row)
    distinct = list(first)
    if top_k == 0:
        return distinct, LinkPairs.concat([])

    # Rows in neighbour-id order, so a column index is also the id tie-break rank.
    names = sorted(first)
    order = np.fromiter((first[name] for name in names), dtype=np.int64, count=len(names))
    valid, normalized = unit_rows(matrix, order)
    names = [name for name, ok in zip(names, valid.tolist(), strict=True) if ok]

    # Each name's index among the distinct ids: what the pairs are over.
    at = {chunk: i for i, chunk in enumerate(distinct)}
    name_rows = np.fromiter((at[name] for name in names), dtype=np.int64, count=len(names))
    parts: list[LinkPairs] = []
    count = len(names)
    for start in range(0, count, block_rows):
        stop = min(start + block_rows, count)
        sims = normalized[start:stop] @ normalized.T
        local = np.arange(stop - start)
        sims[local, start + local] = -np.inf  # a chunk never links to itself
        above = sims > threshold
        if top_k < count - 1 and np.count_nonzero(above) > _CROWDED * top_k * (stop - start):
            # A crowded block (near-duplicate chunks): first cut each row to what can reach
            # its top k, i.e. at least its k-th best value, so the sort below stays small.
            kth = np.partition(sims, count - top_k, axis=1)[:, count - top_k]
            above &= sims >= kth[:, None]
        row, col, sim = best_per_row(sims, above, top_k)
        parts.append(LinkPairs(name_rows[row + start], name_rows[col], sim.astype(np.float64)))
        if on_block is not None:
            on_block(stop, count)
    return distinct, LinkPairs.concat(parts)


def unit_rows(
    vectors: np.ndarray, order: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(valid, normalized)`` of the rows ``vectors[order]`` (all rows without ``order``): which
    can link, and those at unit length as float32, the norm taken in float64 (no overflow) a
    block at a time (docs/performance.md, "Link passes")."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if order is None:
        order = np.arange(matrix.shape[0], dtype=np.int64)
    valid = np.zeros(len(order), dtype=bool)
    normalized = np.empty((len(order), matrix.shape[1]), dtype=np.float32)
    kept = 0
    for start in range(0, len(order), _UNIT_BLOCK_ROWS):
        block = matrix[order[start : start + _UNIT_BLOCK_ROWS]].astype(np.float64)
        norms = np.sqrt(np.einsum("ij,ij->i", block, block))
        ok = np.isfinite(norms) & (norms > 0)
        valid[start : start + len(block)] = ok
        block = block[ok]
        block /= norms[ok, None]
        normalized[kept : kept + len(block)] = block
        kept += len(block)
    return valid, normalized[:kept]


def check_semantic_args(
    ids: Sequence[str], vectors: np.ndarray, threshold: float, top_k: int, block_rows: int
) -> np.ndarray:
    """The semantic pass's arguments checked; the vectors as a float32 matrix."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != len(ids):
        raise ValueError(f"vectors must be ({len(ids)}, d), got shape {matrix.shape}")
    if not math.isfinite(threshold):
        raise ValueError(f"threshold must be finite, got {threshold!r}")
    if top_k < 0:
        raise ValueError(f"top_k must be >= 0, got {top_k!r}")
    if block_rows < 1:
        raise ValueError(f"block_rows must be >= 1, got {block_rows!r}")
    return matrix


def best_per_row(
    sims: np.ndarray, above: np.ndarray, top_k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(row, col, sim)`` of each row's ``top_k`` best entries among those ``above`` marks,
    rows ascending, each row best first, ties by the smaller column (columns are ranks in
    neighbour-id order)."""
    flat = np.flatnonzero(above)  # much faster than a 2-D nonzero
    row, col = np.divmod(flat, sims.shape[1])
    sim = sims.reshape(-1)[flat]
    order = np.lexsort((col, -sim, row))
    row, col, sim = row[order], col[order], sim[order]
    place = np.arange(len(row)) - np.searchsorted(row, row, side="left")
    keep = place < top_k
    return row[keep], col[keep], sim[keep]
