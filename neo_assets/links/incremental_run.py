"""The incremental path of a links run: the links over the new rows from the snapshot's
stored links over its rows, recomputing only the lists the change can reach
(``links.rules.incremental``). ``NeedsFull`` says why a run must compute everything
instead; ``neo_assets.links.link_repo`` then runs the full passes."""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from neo_assets.links.params import LinkParams
from neo_assets.links.rows import RepoRows
from neo_assets.links.rules.incremental import semantic_update, temporal_changes
from neo_assets.links.rules.lists import LinkLists
from neo_assets.links.rules.records import LINK_SEMANTIC, LINK_TEMPORAL
from neo_assets.links.snapshot import Snapshot

# Above this share of the rows added or removed, the full passes are cheaper than merging.
INCREMENTAL_MAX_CHANGE = 0.25

# kind -> chunk -> its new list (empty: the chunk left)
Changed = dict[str, dict[str, list[tuple[str, float]]]]
Replaced = dict[int, list[tuple[int, float]]]  # new row -> its recomputed list


class NeedsFull(Exception):
    """The run cannot be incremental; the message says why."""


@dataclass(frozen=True)
class Outcome:
    lists: dict[str, LinkLists]  # over the new rows
    changed: Changed
    recomputed: int


@dataclass(frozen=True)
class _RowMaps:
    """How the snapshot's rows map onto the new rows (-1: none)."""

    new_at: dict[str, int]  # chunk id -> new row
    by_id: np.ndarray  # old row -> new row of the same id (temporal)
    same_gen: np.ndarray  # old row -> new row of the same id and generation (semantic)
    source_id: np.ndarray  # new row -> old row of the same id
    source_gen: np.ndarray  # new row -> old row of the same id and generation
    new_codes: np.ndarray  # new row -> its generation's code


def _row_maps(snapshot: Snapshot, rows: RepoRows) -> _RowMaps:
    old_ids, old_gens = snapshot.ids, snapshot.generations
    ids, gens = rows.ids, rows.generations
    n, n_old = len(ids), len(old_ids)
    if set(old_gens) != set(gens):
        raise NeedsFull("embedding generations changed")
    new_at = {cid: i for i, cid in enumerate(ids)}
    by_id = np.fromiter((new_at.get(cid, -1) for cid in old_ids), dtype=np.int64, count=n_old)
    codes: dict[str | None, int] = {}
    old_codes = np.asarray([codes.setdefault(g, len(codes)) for g in old_gens], dtype=np.int64)
    new_codes = np.asarray([codes.setdefault(g, len(codes)) for g in gens], dtype=np.int64)
    kept = by_id >= 0
    same_gen = np.where(kept, by_id, -1)
    same_gen[kept & (new_codes[np.maximum(by_id, 0)] != old_codes)] = -1
    source_id = np.full(n, -1, dtype=np.int64)
    source_id[by_id[by_id >= 0]] = np.flatnonzero(by_id >= 0)
    source_gen = np.full(n, -1, dtype=np.int64)
    source_gen[same_gen[same_gen >= 0]] = np.flatnonzero(same_gen >= 0)
    added = int(np.count_nonzero(source_gen < 0))
    removed = int(np.count_nonzero(same_gen < 0))
    if added + removed > INCREMENTAL_MAX_CHANGE * max(n, 1):
        raise NeedsFull("large change")
    return _RowMaps(new_at, by_id, same_gen, source_id, source_gen, new_codes)


def _semantic(
    snapshot: Snapshot, rows: RepoRows, maps: _RowMaps, params: LinkParams
) -> tuple[LinkLists, Replaced, int]:
    """The semantic lists, per embedding generation."""
    assert snapshot.lists is not None
    n = len(rows.ids)
    old_semantic = snapshot.lists[LINK_SEMANTIC]
    replaced: Replaced = {}
    recomputed = 0
    for code in np.unique(maps.new_codes).tolist():
        group = np.flatnonzero(maps.new_codes == code)  # one embedding generation's rows
        positions = group.tolist()
        local = np.full(n, -1, dtype=np.int64)
        local[group] = np.arange(len(group))
        remap = np.where(maps.same_gen >= 0, local[np.maximum(maps.same_gen, 0)], -1)
        previous = old_semantic.patch(maps.source_gen[group], remap, {}, strict=False)
        update = semantic_update(
            [rows.ids[p] for p in positions],
            rows.vectors[group],
            previous,
            maps.source_gen[group] < 0,
            threshold=params.threshold,
            top_k=params.top_k,
            block_rows=params.block_rows,
        )
        recomputed += update.recomputed
        for r, kept in update.replaced.items():
            replaced[positions[r]] = [(positions[m], w) for m, w in kept]
    return old_semantic.patch(maps.source_gen, maps.same_gen, replaced), replaced, recomputed


def _temporal(
    snapshot: Snapshot,
    rows: RepoRows,
    times: Sequence[float],
    maps: _RowMaps,
    params: LinkParams,
) -> tuple[LinkLists, Replaced]:
    """The temporal lists: only the chunks whose window the change reaches are recomputed."""
    assert snapshot.lists is not None and snapshot.kinds is not None
    assert snapshot.times is not None
    changes = temporal_changes(
        list(zip(snapshot.ids, snapshot.kinds, snapshot.times.tolist(), strict=True)),
        list(zip(rows.ids, rows.kinds, times, strict=True)),
        window_seconds=params.window_seconds,
        per_chunk=params.per_chunk,
        candidate_window=params.candidate_window,
    )
    new_at = maps.new_at
    replaced = {new_at[c]: [(new_at[m], w) for m, w in kept] for c, kept in changes.items()}
    return snapshot.lists[LINK_TEMPORAL].patch(maps.source_id, maps.by_id, replaced), replaced


def _changed(
    snapshot: Snapshot, ids: Sequence[str], maps: _RowMaps, replaced: dict[str, Replaced]
) -> Changed:
    """What to write: the replaced lists that differ from the stored ones, and the rows of
    chunks that left."""
    assert snapshot.lists is not None
    old_ids = snapshot.ids
    changed: Changed = {}
    for kind, by_row in replaced.items():
        before = snapshot.lists[kind]
        out: dict[str, list[tuple[str, float]]] = {}
        for r, kept in by_row.items():
            new = [(ids[m], w) for m, w in kept]
            o = int(maps.source_id[r])
            old = [(old_ids[m], w) for m, w in before.row(o)] if o >= 0 else []
            if new != old:
                out[ids[r]] = new
        lengths = before.lengths()
        for o in np.flatnonzero((maps.by_id < 0) & (lengths > 0)).tolist():
            out[old_ids[o]] = []
        changed[kind] = out
    return changed


def run_incremental(
    snapshot: Snapshot, rows: RepoRows, times: Sequence[float], params: LinkParams
) -> Outcome:
    """The links over ``rows`` from the snapshot's stored links over its rows: only the
    lists the change can reach are recomputed (``links.rules.incremental``)."""
    maps = _row_maps(snapshot, rows)
    semantic, replaced_s, recomputed = _semantic(snapshot, rows, maps, params)
    temporal, replaced_t = _temporal(snapshot, rows, times, maps, params)
    recomputed += len(replaced_t)
    replaced = {LINK_SEMANTIC: replaced_s, LINK_TEMPORAL: replaced_t}
    changed = _changed(snapshot, rows.ids, maps, replaced)
    return Outcome({LINK_SEMANTIC: semantic, LINK_TEMPORAL: temporal}, changed, recomputed)
