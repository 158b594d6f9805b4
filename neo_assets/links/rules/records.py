"""What the link passes are fed and what is kept of them: a chunk's time is its file's last
change (undated: NaN, never linked in time); semantic links stay within one generation;
the ledger keeps one best-first list per (chunk, kind); expansion merges the kinds."""

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

LINK_TEMPORAL = "temporal"
LINK_SEMANTIC = "semantic"
# Also the tie order when one neighbour is linked by both kinds with the same weight:
# shared meaning is the more specific evidence than a shared change time.
LINK_KINDS = (LINK_SEMANTIC, LINK_TEMPORAL)


@dataclass(frozen=True)
class LinkRecord:
    """One directed link, flat (for reading a repo's links back); ``rank`` 0 is the
    chunk's strongest link of this kind."""

    chunk_id: str
    link_kind: str
    neighbour_id: str
    weight: float
    rank: int


@dataclass(frozen=True)
class Neighbour:
    """A neighbour offered for expansion: its strongest link to the chunk."""

    neighbour_id: str
    link_kind: str
    weight: float


def temporal_items(
    chunks: Iterable[tuple[str, str, str]],
    changed_at: Mapping[str, float | None],
) -> list[tuple[str, str, float]]:
    """``(chunk_id, kind, source_path)`` and each path's change time to the temporal pass's
    ``(chunk_id, kind, changed_at)``. A path without a finite time gives NaN."""
    items: list[tuple[str, str, float]] = []
    for chunk_id, kind, path in chunks:
        at = changed_at.get(path)
        value = float(at) if isinstance(at, int | float) and not isinstance(at, bool) else math.nan
        items.append((chunk_id, kind, value if math.isfinite(value) else math.nan))
    return items


def generation_groups(rows: Iterable[tuple[str, str | None]]) -> dict[str | None, list[int]]:
    """Row positions grouped by embedding generation, first-seen order; vectors of two
    generations are never compared."""
    groups: dict[str | None, list[int]] = {}
    for position, (_chunk_id, generation) in enumerate(rows):
        groups.setdefault(generation, []).append(position)
    return groups


def check_link_kind(link_kind: str) -> None:
    """Refuse a link kind the ledger does not keep."""
    if link_kind not in LINK_KINDS:
        raise ValueError(f"unknown link kind {link_kind!r}; expected one of {LINK_KINDS}")


def iter_kept_lists(
    link_kind: str, links: Mapping[str, Sequence[tuple[str, float]]]
) -> Iterator[tuple[str, list[tuple[str, float]]]]:
    """A pass's output as the ledger keeps it, one chunk at a time (a repo's lists are
    written in batches, not held whole): one best-first list per chunk that has a link (a
    chunk without links has no record). Refuses an unknown kind (before the first) and a
    self link."""
    check_link_kind(link_kind)
    return _kept(links)


def _kept(
    links: Mapping[str, Sequence[tuple[str, float]]],
) -> Iterator[tuple[str, list[tuple[str, float]]]]:
    for chunk_id, kept in links.items():
        if not kept:
            continue
        if any(neighbour_id == chunk_id for neighbour_id, _ in kept):
            raise ValueError(f"a chunk never links to itself: {chunk_id}")
        yield chunk_id, [(neighbour_id, float(weight)) for neighbour_id, weight in kept]


def link_records(
    link_kind: str, links: Mapping[str, Sequence[tuple[str, float]]]
) -> list[LinkRecord]:
    """A pass's output (best first per chunk) as flat records ranked per chunk."""
    return [
        LinkRecord(chunk_id, link_kind, neighbour_id, weight, rank)
        for chunk_id, kept in iter_kept_lists(link_kind, links)
        for rank, (neighbour_id, weight) in enumerate(kept)
    ]


def strongest_neighbours(
    links: Iterable[tuple[str, str, float]], *, exclude: str, limit: int
) -> list[Neighbour]:
    """At most ``limit`` neighbours from ``(neighbour_id, link_kind, weight)`` links of one
    chunk: one entry per neighbour (its strongest link; equal weights prefer the kind listed
    first in ``LINK_KINDS``), never ``exclude`` (the chunk itself), best first, then by
    neighbour id. Unknown kinds and non-finite weights are ignored."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit!r}")
    best: dict[str, tuple[float, int]] = {}
    for neighbour_id, link_kind, weight in links:
        if neighbour_id == exclude or link_kind not in LINK_KINDS:
            continue
        w = float(weight)
        if not math.isfinite(w):
            continue
        key = (w, -LINK_KINDS.index(link_kind))
        held = best.get(neighbour_id)
        if held is None or key > (held[0], -held[1]):
            best[neighbour_id] = (w, LINK_KINDS.index(link_kind))
    ordered = sorted(best.items(), key=lambda item: (-item[1][0], item[1][1], item[0]))
    return [Neighbour(nid, LINK_KINDS[kind], w) for nid, (w, kind) in ordered[:limit]]
