"""Incremental link passes: a repo's links after a change, with work in proportion to the
change, equal to the full passes over the new rows (up to the full pass's own float32
rounding). Design: docs/design/links.md#incremental-passes"""

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from neo_assets.links.rules.lists import IndexLinks, LinkLists
from neo_assets.links.rules.passes import (
    Links,
    best_per_row,
    check_semantic_args,
    temporal_links,
    unit_rows,
)

# --- semantic ----------------------------------------------------------------------------


def _best(sims: np.ndarray, threshold: float, top_k: int) -> list[list[tuple[int, float]]]:
    """Each row's ``top_k`` columns strictly above ``threshold``, best first, ties by the
    smaller column: the selection of ``semantic_links`` (columns are ranks in id order)."""
    out: list[list[tuple[int, float]]] = [[] for _ in range(sims.shape[0])]
    row, col, sim = best_per_row(sims, sims > threshold, top_k)
    for r, c, s in zip(row.tolist(), col.tolist(), sim.tolist(), strict=True):
        out[r].append((c, s))
    return out


@dataclass(frozen=True)
class SemanticUpdate:
    """Rows whose list may differ from the previous one, with their new list (row indices);
    every other row keeps its previous list. ``recomputed`` rows got a full row (A and rows
    that lost a neighbour from a full list), ``merged`` rows took neighbours from A or
    dropped removed ones."""

    replaced: dict[int, IndexLinks]
    recomputed: int
    merged: int


@dataclass(frozen=True)
class _Columns:
    """The columns of the similarity rows: the valid rows in id order, as in
    ``semantic_links`` (a column index is also the id tie-break rank)."""

    normalized: np.ndarray  # one unit row per column
    row_of_col: np.ndarray
    col_of_row: np.ndarray  # -1: the row cannot link
    rank: np.ndarray  # row -> its rank in id order


def _columns(names: Sequence[str], matrix: np.ndarray) -> _Columns:
    n = len(names)
    order = np.asarray(sorted(range(n), key=names.__getitem__), dtype=np.int64)
    valid_sorted, normalized = unit_rows(matrix, order)
    row_of_col = order[valid_sorted]
    col_of_row = np.full(n, -1, dtype=np.int64)
    col_of_row[row_of_col] = np.arange(len(row_of_col))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    return _Columns(normalized, row_of_col, col_of_row, rank)


def _rows_to_recompute(
    previous: LinkLists, added: np.ndarray, valid: np.ndarray, top_k: int
) -> tuple[np.ndarray, dict[int, IndexLinks]]:
    """Which rows get a full row, and the lists already known: unchanged rows that lost a
    neighbour from a short list drop it; rows that cannot link keep nothing."""
    n = previous.rows
    lengths = previous.lengths()
    replaced: dict[int, IndexLinks] = {}
    recompute = added.copy()
    # Unchanged rows that lost a neighbour (a row that left, or one of A: never a previous
    # neighbour, so a list naming one is not a previous list) or hold more than top_k.
    owner = np.repeat(np.arange(n), lengths)
    nbr = previous.neighbours
    lost = (nbr < 0) | added[np.clip(nbr, 0, max(n - 1, 0))] if len(nbr) else nbr < 0
    for r in np.unique(owner[lost]).tolist():
        if added[r]:
            continue
        if lengths[r] >= top_k:
            recompute[r] = True
        else:
            replaced[r] = [(m, w) for m, w in previous.row(r) if m >= 0 and not added[m]]
    recompute[np.flatnonzero(~added & (lengths > top_k))] = True
    # A row that cannot link keeps nothing.
    for r in np.flatnonzero(~valid & (added | recompute | (lengths > 0))).tolist():
        replaced[r] = []
        recompute[r] = False
    return recompute, replaced


def _full_rows(
    rows: np.ndarray,
    cols: _Columns,
    replaced: dict[int, IndexLinks],
    *,
    threshold: float,
    top_k: int,
    block_rows: int,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Full rows for ``rows`` (into ``replaced``), block by block, with each block's
    similarities to every column."""
    for start in range(0, len(rows), block_rows):
        block = rows[start : start + block_rows]
        at = cols.col_of_row[block]
        sims = cols.normalized[at] @ cols.normalized.T
        sims[np.arange(len(block)), at] = -np.inf  # a chunk never links to itself
        for r, kept in zip(block.tolist(), _best(sims, threshold, top_k), strict=True):
            replaced[r] = [(int(cols.row_of_col[c]), w) for c, w in kept]
        yield block, sims


def _gains(
    previous: LinkLists,
    cols: _Columns,
    takes: np.ndarray,
    blocks: Iterable[tuple[np.ndarray, np.ndarray]],
    *,
    threshold: float,
    top_k: int,
) -> dict[int, list[tuple[int, float]]]:
    """The rows of A that enter the lists of unchanged rows (``takes``). A gain enters a
    full list only if it beats the list's last entry (weight, then id): the k entries
    ranked above it stay. Checked for all pairs at once."""
    n, rank, nbr = previous.rows, cols.rank, previous.neighbours
    lengths = previous.lengths()
    full = takes & (lengths >= top_k)
    last = np.where(full, previous.offsets[1:] - 1, 0)
    last_weight = np.where(full, previous.weights[last] if len(nbr) else 0.0, -np.inf)
    last_rank = np.where(full, rank[np.maximum(nbr[last], 0)] if len(nbr) else 0, n)
    gains: dict[int, list[tuple[int, float]]] = {}
    for block, sims in blocks:
        a_local, at = np.nonzero((sims > threshold) & takes[cols.row_of_col][None, :])
        targets = cols.row_of_col[at]
        weights = sims[a_local, at].astype(np.float64)
        sources = block[a_local]
        beats = (weights > last_weight[targets]) | (
            (weights == last_weight[targets]) & (rank[sources] < last_rank[targets])
        )
        for a, u, w in zip(
            sources[beats].tolist(), targets[beats].tolist(), weights[beats].tolist(), strict=True
        ):
            gains.setdefault(u, []).append((a, w))
    return gains


def semantic_update(
    names: Sequence[str],
    vectors: np.ndarray,
    previous: LinkLists,
    added: np.ndarray,
    *,
    threshold: float,
    top_k: int,
    block_rows: int,
) -> SemanticUpdate:
    """``semantic_links`` over ``names``/``vectors`` from the previous pass's lists: ``previous``
    holds each non-added row's list with neighbours as row indices here (-1: gone). The
    parameters must be those of the previous pass."""
    matrix = check_semantic_args(names, vectors, threshold, top_k, block_rows)
    if len(set(names)) != len(names):
        raise ValueError("row ids must be distinct")
    n = len(names)
    added = np.asarray(added, dtype=bool)
    if added.shape != (n,) or previous.rows != n:
        raise ValueError(f"previous and added must cover the {n} rows")
    lengths = previous.lengths()
    if top_k == 0:
        return SemanticUpdate({r: [] for r in range(n) if added[r] or lengths[r]}, 0, 0)

    cols = _columns(names, matrix)
    valid = cols.col_of_row >= 0
    recompute, replaced = _rows_to_recompute(previous, added, valid, top_k)
    recomputed = int(np.count_nonzero(recompute))
    pass_args = {"threshold": threshold, "top_k": top_k, "block_rows": block_rows}

    # Rows of A: full rows, and their similarities to every row give the others' gains,
    # merged row by row below.
    takes = valid & ~recompute  # unchanged rows that keep their list and merge
    of_added = _full_rows(np.flatnonzero(recompute & added), cols, replaced, **pass_args)
    gains = _gains(previous, cols, takes, of_added, threshold=threshold, top_k=top_k)
    # Unchanged rows that lost a neighbour from a full list: full rows.
    for _ in _full_rows(np.flatnonzero(recompute & ~added), cols, replaced, **pass_args):
        pass

    merged = set(replaced) - set(np.flatnonzero(recompute).tolist())
    for r, extra in gains.items():
        base = replaced[r] if r in replaced else previous.row(r)
        candidates = base + extra
        candidates.sort(key=lambda link: (-link[1], cols.rank[link[0]]))
        replaced[r] = candidates[:top_k]
        merged.add(r)
    return SemanticUpdate(replaced, recomputed, len(merged))


def semantic_links_update(
    previous: Mapping[str, Sequence[tuple[str, float]]],
    previous_ids: Collection[str],
    ids: Sequence[str],
    vectors: np.ndarray,
    *,
    threshold: float,
    top_k: int,
    block_rows: int,
) -> Links:
    """``semantic_links(ids, vectors)`` from ``previous``, the output of ``semantic_links``
    over the rows ``previous_ids`` with the same parameters (ids of ``previous_ids`` that
    are still in ``ids`` must carry the same vectors). Keyed by chunk id, for callers with
    plain lists; ids must be distinct."""
    before = set(previous_ids)
    index = {chunk: i for i, chunk in enumerate(ids)}
    added = np.fromiter((chunk not in before for chunk in ids), dtype=bool, count=len(ids))
    rows = [
        []
        if added[i]
        else [
            (index[m] if m in index and m in before else -1, w) for m, w in previous.get(chunk, ())
        ]
        for i, chunk in enumerate(ids)
    ]
    update = semantic_update(
        ids,
        vectors,
        LinkLists.from_rows(rows),
        added,
        threshold=threshold,
        top_k=top_k,
        block_rows=block_rows,
    )
    return {
        chunk: [(ids[m], w) for m, w in update.replaced.get(i, rows[i])]
        for i, chunk in enumerate(ids)
    }


# --- temporal ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Timeline:
    """One side's distinct chunks (first occurrence, as the temporal pass reads them) and
    the timed ones in the pass's order: by kind, time, id."""

    ids: list[str]
    kind_names: list[str]
    kinds: np.ndarray  # int64 codes, shared by both sides
    times: np.ndarray  # float64
    order: np.ndarray  # positions of the timed chunks, sorted by (kind, time, id)


def _timeline(items: Sequence[tuple[str, str, float]], codes: dict[str, int]) -> _Timeline:
    ids = [chunk for chunk, _, _ in items]
    if len(set(ids)) != len(ids):
        first: dict[str, tuple[str, str, float]] = {}
        for item in items:
            first.setdefault(item[0], item)
        items = list(first.values())
        ids = [chunk for chunk, _, _ in items]
    kind_names = [kind for _, kind, _ in items]
    kinds = np.asarray([codes.setdefault(kind, len(codes)) for kind in kind_names], dtype=np.int64)
    times = np.asarray([float(at) for _, _, at in items], dtype=np.float64).reshape(-1)
    timed = np.flatnonzero(np.isfinite(times))
    id_rank = np.empty(len(ids), dtype=np.int64)
    id_rank[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))
    order = timed[np.lexsort((id_rank[timed], times[timed], kinds[timed]))]
    return _Timeline(ids, kind_names, kinds, times, order)


def _near(kinds: np.ndarray, marked: np.ndarray, reach: int) -> np.ndarray:
    """Which positions of a (kind, time, id) order, whose kinds are ``kinds``, have a marked
    position of the same kind within ``reach`` places."""
    count = len(kinds)
    if count == 0:
        return np.zeros(0, dtype=bool)
    positions = np.arange(count)
    boundary = np.flatnonzero(kinds[1:] != kinds[:-1]) + 1
    starts = np.concatenate(([0], boundary))
    ends = np.concatenate((boundary, [count]))
    block = np.searchsorted(starts, positions, side="right") - 1
    low = np.maximum(positions - reach, starts[block])
    high = np.minimum(positions + reach + 1, ends[block])
    before = np.concatenate(([0], np.cumsum(marked, dtype=np.int64)))
    return (before[high] - before[low]) > 0


def temporal_changes(
    previous_items: Sequence[tuple[str, str, float]],
    items: Sequence[tuple[str, str, float]],
    *,
    window_seconds: float,
    per_chunk: int,
    candidate_window: int,
) -> Links:
    """The chunks of ``items`` whose list in ``temporal_links(items)`` may differ from their
    list in ``temporal_links(previous_items)`` (same parameters), with their new lists; every
    other chunk keeps its list (docs/design/links.md#incremental-passes)."""
    codes: dict[str, int] = {}
    old, new = _timeline(previous_items, codes), _timeline(items, codes)
    # A chunk is unchanged when it is on both sides with the same kind and time (or
    # untimed on both).
    at_old = {chunk: i for i, chunk in enumerate(old.ids)}
    match = np.fromiter((at_old.get(c, -1) for c in new.ids), dtype=np.int64, count=len(new.ids))
    both = match >= 0
    o = match[both]
    same_time = (new.times[both] == old.times[o]) | (
        ~np.isfinite(new.times[both]) & ~np.isfinite(old.times[o])
    )
    unchanged_new = np.zeros(len(new.ids), dtype=bool)
    unchanged_new[both] = (new.kinds[both] == old.kinds[o]) & same_time
    unchanged_old = np.zeros(len(old.ids), dtype=bool)
    unchanged_old[o] = unchanged_new[both]

    reach = candidate_window
    # Affected: changed chunks, and chunks within reach of a change in either order.
    affected = ~unchanged_new
    near_old = _near(old.kinds[old.order], ~unchanged_old[old.order], reach)
    hit_old = old.order[near_old]
    hit_old = hit_old[unchanged_old[hit_old]]
    new_of_old = np.full(len(old.ids), -1, dtype=np.int64)
    new_of_old[o] = np.flatnonzero(both)
    affected[new_of_old[hit_old]] = True
    new_kinds = new.kinds[new.order]
    affected[new.order[_near(new_kinds, ~unchanged_new[new.order], reach)]] = True
    # Each affected chunk's whole window: the slice the temporal pass runs over.
    inside = new.order[_near(new_kinds, affected[new.order], reach)]
    fresh = temporal_links(
        [(new.ids[p], new.kind_names[p], float(new.times[p])) for p in inside.tolist()],
        window_seconds=window_seconds,
        per_chunk=per_chunk,
        candidate_window=candidate_window,
    )
    # Untimed affected chunks never link in time.
    return {new.ids[p]: fresh.get(new.ids[p], []) for p in np.flatnonzero(affected).tolist()}
