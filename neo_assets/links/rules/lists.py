"""One pass's links over row indices, held as compressed rows (``LinkLists``), so the shell
can keep a repo's lists between runs and patch only the changed rows; ``LinksView`` reads
them as lists of (chunk id, weight) without building them all."""

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from neo_assets.links.rules.passes import LinkPairs, Links

IndexLinks = list[tuple[int, float]]


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
        neighbours, weights = self.neighbours[start:stop], self.weights[start:stop]
        return list(zip(neighbours.tolist(), weights.tolist(), strict=True))

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
        """The lists over new rows: row ``r`` keeps ``replaced[r]``, else old row
        ``source[r]``'s list renumbered by ``remap``, else nothing. A kept list naming a
        dropped row is refused when ``strict``, else that neighbour reads -1."""
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
