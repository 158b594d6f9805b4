"""Incremental link passes: a repo's links after a change, from the links of the rows
before it and work in proportion to the change, equal to the full passes over the new rows.

Both rules below take the output of a full pass (``links.rules``) over the previous rows and
say which chunks' lists can differ in the full pass over the new rows, and what those lists
are. Every other chunk keeps its previous list unchanged: that is the whole saving.

Semantic (``semantic_update``), per embedding generation, with A the rows added and R the
rows removed since the previous pass:

- a chunk of A gets a full row against every row;
- an unchanged chunk whose list names a chunk of R lost a neighbour. If its list was full
  (``top_k`` entries), the candidate that now moves up was below the cut and is unknown, so
  the row is recomputed in full. If the list was shorter, it held every candidate above the
  threshold: dropping the removed neighbours is its exact list over the remaining rows;
- an unchanged chunk whose list names no chunk of R keeps the ``top_k`` best of its previous
  candidates (R removed only candidates below its cut), so its new list is the ``top_k`` best
  of its previous list and the chunks of A above the threshold. ``top_k`` of a union is
  ``top_k`` of (``top_k`` of one part, the other part), so merging is exact. The
  similarities of A against all rows are computed once (|A| x n) and serve both the rows of A
  and these merges.

Similarities are computed as the full pass computes them: the same float64 normalisation of
each row cast to float32, float32 matrix products, the threshold compared in float32, ties by
the smaller neighbour id (an unchanged chunk's similarity to an added one is read from the
added one's row: the same dot product). Where those products are exact (the tests use such
vectors) the result equals the full pass bit for bit. With arbitrary float32 vectors even
the full pass is not a function of the row set at the last bit: BLAS accumulates a dot
product in an order that depends on where the pair sits in the blocked product (and a.b
and b.a can differ), so adding one unrelated row to a full pass moves some weights by a
few ulp, and neighbours tied to within those ulp can trade places. The incremental result
differs from a fresh full pass only by that rounding, never by a rule (``bench/links.py``
measures both: the same lists differ between two full passes).

Temporal (``temporal_changes``): a chunk's list in the bounded temporal pass is a function of
the ``candidate_window`` chunks on either side of it in its kind's (time, id) order (see
``links.rules.passes.temporal_links``). A chunk whose window, before and after the change, holds no
added, removed or re-timed chunk has the same window and so the same list; the others are
recomputed by the temporal pass itself over a slice that holds each one's whole window. That
is exact, ties included, because the slice gives each recomputed chunk the very candidates
the full pass gives it.

``LinkLists`` holds one pass's output over row indices (compressed rows), so the shell can
keep a repo's lists between runs and patch only the changed rows.
"""

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from neo_assets.links.rules.passes import (
    LinkPairs,
    Links,
    best_per_row,
    check_semantic_args,
    temporal_links,
    unit_rows,
)

IndexLinks = list[tuple[int, float]]


# --- compressed lists ------------------------------------------------------------------


@dataclass(frozen=True)
class LinkLists:
    """One pass's output over row indices: row ``i`` keeps
    ``neighbours[offsets[i]:offsets[i + 1]]`` (row indices, best first) with their
    ``weights``."""

    offsets: np.ndarray  # int64, (rows + 1,), offsets[0] == 0, non-decreasing
    neighbours: np.ndarray  # int64
    weights: np.ndarray  # float64

    @classmethod
    def empty(cls, rows: int) -> "LinkLists":
        return cls(
            np.zeros(rows + 1, dtype=np.int64),
            np.zeros(0, dtype=np.int64),
            np.zeros(0, dtype=np.float64),
        )

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[tuple[int, float]]]) -> "LinkLists":
        lengths = np.fromiter((len(kept) for kept in rows), dtype=np.int64, count=len(rows))
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        total = int(offsets[-1])
        neighbours = np.fromiter((n for kept in rows for n, _ in kept), dtype=np.int64, count=total)
        weights = np.fromiter((w for kept in rows for _, w in kept), dtype=np.float64, count=total)
        return cls(offsets, neighbours, weights)

    @classmethod
    def from_links(
        cls, links: Mapping[str, Sequence[tuple[str, float]]], ids: Sequence[str]
    ) -> "LinkLists":
        """A pass's output keyed by chunk id, over the rows ``ids`` (a chunk missing from
        ``links`` keeps nothing). Refuses a neighbour that is not one of ``ids``."""
        index = {chunk: i for i, chunk in enumerate(ids)}
        try:
            rows = [[(index[n], w) for n, w in links.get(chunk, ())] for chunk in ids]
        except KeyError as missing:
            raise ValueError(f"a neighbour is not one of the rows: {missing}") from None
        return cls.from_rows(rows)

    @classmethod
    def from_pairs(cls, rows: int, pairs: LinkPairs) -> "LinkLists":
        """A pass's pairs (``links.rules``) over ``rows`` rows. Refuses a row out of range."""
        if len(pairs.src) and (
            int(pairs.src.min()) < 0
            or int(pairs.src.max()) >= rows
            or int(pairs.dst.min()) < 0
            or int(pairs.dst.max()) >= rows
        ):
            raise ValueError(f"a link names a row outside the {rows} rows")
        offsets = np.zeros(rows + 1, dtype=np.int64)
        np.cumsum(np.bincount(pairs.src, minlength=rows), out=offsets[1:])
        return cls(offsets, pairs.dst, pairs.weight)

    @property
    def rows(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def row(self, i: int) -> IndexLinks:
        start, stop = int(self.offsets[i]), int(self.offsets[i + 1])
        return list(
            zip(
                self.neighbours[start:stop].tolist(), self.weights[start:stop].tolist(), strict=True
            )
        )

    def to_links(self, ids: Sequence[str]) -> Links:
        return dict(self.as_links(ids).lists())

    def as_links(self, ids: Sequence[str]) -> "LinksView":
        """These lists keyed by chunk id (``ids[i]`` is row ``i``), built a list at a time
        as they are read: what a store writes from without holding a tuple per link."""
        return LinksView(self, ids)

    def is_well_formed(self, rows: int) -> bool:
        """Shapes, offsets and neighbour bounds fit ``rows`` rows (for a list read back)."""
        o, n, w = self.offsets, self.neighbours, self.weights
        return bool(
            o.ndim == 1
            and n.ndim == 1
            and w.ndim == 1
            and len(o) == rows + 1
            and len(n) == len(w)
            and o[0] == 0
            and o[-1] == len(n)
            and np.all(np.diff(o) >= 0)
            and (len(n) == 0 or (int(n.min()) >= 0 and int(n.max()) < rows))
            and np.all(np.isfinite(w))
        )

    def patch(
        self,
        source: np.ndarray,
        remap: np.ndarray,
        replaced: Mapping[int, Sequence[tuple[int, float]]],
        *,
        strict: bool = True,
    ) -> "LinkLists":
        """The lists over new rows: row ``r`` keeps ``replaced[r]`` when given, else the list
        of old row ``source[r]`` with each neighbour renumbered by ``remap`` (old row -> new
        row), else nothing (``source[r] == -1``). A kept list naming a row that ``remap``
        drops (-1) is refused when ``strict`` (that row's list had to be replaced), else
        the neighbour reads -1."""
        rows = len(source)
        source = np.asarray(source, dtype=np.int64)
        remap = np.asarray(remap, dtype=np.int64)
        keep = source >= 0
        if replaced:
            keep[np.fromiter(replaced, dtype=np.int64, count=len(replaced))] = False
        old_lengths = self.lengths()
        lengths = np.zeros(rows, dtype=np.int64)
        lengths[keep] = old_lengths[source[keep]]
        for r, kept in replaced.items():
            lengths[r] = len(kept)
        offsets = np.zeros(rows + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        neighbours = np.empty(int(offsets[-1]), dtype=np.int64)
        weights = np.empty(int(offsets[-1]), dtype=np.float64)

        kept_rows = np.flatnonzero(keep)
        counts = lengths[kept_rows]
        total = int(counts.sum())
        if total:
            step = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
            src = np.repeat(self.offsets[source[kept_rows]], counts) + step
            dst = np.repeat(offsets[kept_rows], counts) + step
            mapped = remap[self.neighbours[src]]
            if strict and np.any(mapped < 0):
                raise ValueError("a kept list names a row that left; it had to be replaced")
            neighbours[dst] = mapped
            weights[dst] = self.weights[src]
        for r, kept in replaced.items():
            start = int(offsets[r])
            for place, (n, w) in enumerate(kept):
                neighbours[start + place] = n
                weights[start + place] = w
        return LinkLists(offsets, neighbours, weights)


class LinksView(Mapping[str, list[tuple[str, float]]]):
    """``LinkLists`` read as ``Links`` (chunk id -> best-first ``(neighbour id, weight)``),
    each list built when it is read."""

    def __init__(self, lists: LinkLists, ids: Sequence[str]) -> None:
        if len(ids) != lists.rows:
            raise ValueError(f"{len(ids)} ids for {lists.rows} rows")
        self._lists = lists
        self._ids = ids
        self._at: dict[str, int] | None = None

    def _list(self, i: int) -> list[tuple[str, float]]:
        ids = self._ids
        return [(ids[n], w) for n, w in self._lists.row(i)]

    def __getitem__(self, chunk: str) -> list[tuple[str, float]]:
        if self._at is None:
            self._at = {c: i for i, c in enumerate(self._ids)}
        return self._list(self._at[chunk])

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def lists(self) -> Iterator[tuple[str, list[tuple[str, float]]]]:
        """``items()`` in row order, without a lookup per chunk."""
        for i, chunk in enumerate(self._ids):
            yield chunk, self._list(i)


# --- semantic ----------------------------------------------------------------------------


def _best(sims: np.ndarray, threshold: float, top_k: int) -> list[list[tuple[int, float]]]:
    """Each row's ``top_k`` columns strictly above ``threshold``, best first, ties by the
    smaller column: the selection of ``semantic_links`` (columns are ranks in id order)."""
    out: list[list[tuple[int, float]]] = [[] for _ in range(sims.shape[0])]
    row, col, sim = best_per_row(sims, sims > threshold, top_k)
    for r, c, s in zip(row.tolist(), col.tolist(), sim.tolist(), strict=True):
        out[r].append((c, s))
    return out


def _check_semantic_args(
    names: Sequence[str], vectors: np.ndarray, threshold: float, top_k: int, block_rows: int
) -> np.ndarray:
    matrix = check_semantic_args(names, vectors, threshold, top_k, block_rows)
    if len(set(names)) != len(names):
        raise ValueError("row ids must be distinct")
    return matrix


@dataclass(frozen=True)
class SemanticUpdate:
    """Rows whose list may differ from the previous one, with their new list (row indices);
    every other row keeps its previous list. ``recomputed`` rows got a full row (A and rows
    that lost a neighbour from a full list), ``merged`` rows took neighbours from A or
    dropped removed ones."""

    replaced: dict[int, IndexLinks]
    recomputed: int
    merged: int


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
    """``semantic_links`` over ``names``/``vectors`` (one embedding generation, distinct ids)
    from the previous pass's lists (see the module docstring for the rule).

    ``previous`` holds, for each row not in ``added``, its list in the full pass over the
    previous rows with neighbours as row indices here, and -1 for a neighbour that is no
    longer among these rows. Rows in ``added`` were not among the previous rows; their
    previous lists are ignored. The parameters must be those of the previous pass.
    """
    matrix = _check_semantic_args(names, vectors, threshold, top_k, block_rows)
    n = len(names)
    added = np.asarray(added, dtype=bool)
    if added.shape != (n,) or previous.rows != n:
        raise ValueError(f"previous and added must cover the {n} rows")
    lengths = previous.lengths()
    if top_k == 0:
        return SemanticUpdate({r: [] for r in range(n) if added[r] or lengths[r]}, 0, 0)

    # Columns are the valid rows in id order, as in semantic_links: a column index is also
    # the id tie-break rank.
    order = np.asarray(sorted(range(n), key=names.__getitem__), dtype=np.int64)
    valid_sorted, normalized = unit_rows(matrix, order)
    row_of_col = order[valid_sorted]
    col_of_row = np.full(n, -1, dtype=np.int64)
    col_of_row[row_of_col] = np.arange(len(row_of_col))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    valid = col_of_row >= 0

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
    recomputed = int(np.count_nonzero(recompute))

    def full_rows(rows: np.ndarray) -> Iterable[tuple[np.ndarray, np.ndarray]]:
        for start in range(0, len(rows), block_rows):
            block = rows[start : start + block_rows]
            cols = col_of_row[block]
            sims = normalized[cols] @ normalized.T
            sims[np.arange(len(block)), cols] = -np.inf  # a chunk never links to itself
            for r, kept in zip(block.tolist(), _best(sims, threshold, top_k), strict=True):
                replaced[r] = [(int(row_of_col[c]), w) for c, w in kept]
            yield block, sims

    # Rows of A: full rows, and their similarities to every row give the others' gains. A
    # gain enters a full list only if it beats the list's last entry (weight, then id): the
    # k entries ranked above it stay. Checked for all pairs at once, merged row by row.
    takes = valid & ~recompute  # unchanged rows that keep their list and merge
    full = takes & (lengths >= top_k)
    last = np.where(full, previous.offsets[1:] - 1, 0)
    last_weight = np.where(full, previous.weights[last] if len(nbr) else 0.0, -np.inf)
    last_rank = np.where(full, rank[np.maximum(nbr[last], 0)] if len(nbr) else 0, n)
    gains: dict[int, list[tuple[int, float]]] = {}
    for block, sims in full_rows(np.flatnonzero(recompute & added)):
        a_local, cols = np.nonzero((sims > threshold) & takes[row_of_col][None, :])
        targets = row_of_col[cols]
        weights = sims[a_local, cols].astype(np.float64)
        sources = block[a_local]
        beats = (weights > last_weight[targets]) | (
            (weights == last_weight[targets]) & (rank[sources] < last_rank[targets])
        )
        for a, u, w in zip(
            sources[beats].tolist(), targets[beats].tolist(), weights[beats].tolist(), strict=True
        ):
            gains.setdefault(u, []).append((a, w))
    # Unchanged rows that lost a neighbour from a full list: full rows.
    for _ in full_rows(np.flatnonzero(recompute & ~added)):
        pass

    merged = set(replaced) - set(np.flatnonzero(recompute).tolist())
    for r, extra in gains.items():
        base = replaced[r] if r in replaced else previous.row(r)
        candidates = base + extra
        candidates.sort(key=lambda link: (-link[1], rank[link[0]]))
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
    list in ``temporal_links(previous_items)`` (same parameters), with their new lists.
    Every other chunk of ``items`` keeps its previous list (see the module docstring)."""
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
