"""Glue for the ``chunk_links`` asset: one repo's declared generation in (rows present in the
collection, so every link lands on a row a query can show), its links stored. A run is
proportional to change through a snapshot; whenever the snapshot cannot vouch for the
stored links the run is full, the reference the incremental one is held to.
Design: docs/design/links.md#incremental-runs"""

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from neo_assets.links.incremental_run import NeedsFull, Outcome, run_incremental
from neo_assets.links.params import LinkParams
from neo_assets.links.rows import RepoRows, gather_rows, row_times
from neo_assets.links.rules.lists import LinkLists
from neo_assets.links.rules.passes import LinkPairs, LinkStats, semantic_pairs, temporal_pairs
from neo_assets.links.rules.records import (
    LINK_KINDS,
    LINK_SEMANTIC,
    LINK_TEMPORAL,
    generation_groups,
)
from neo_assets.links.snapshot import (
    Snapshot,
    default_cache_dir,
    load_snapshot,
    save_snapshot,
    snapshot_path,
)
from neo_assets.links.store import (
    LinkSetMoved,
    link_set,
    link_set_values,
    replace_links,
    same_link_set,
    update_links,
)
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger

MODE_FULL = "full"
MODE_INCREMENTAL = "incremental"


@dataclass(frozen=True)
class LinkReport:
    """What one links run saw, computed and stored (for metadata and logs)."""

    tenant_id: str
    repo_slug: str
    revision: str | None
    stored: bool
    declared_chunks: int = 0
    rows: int = 0  # declared chunks present in the collection: what the passes saw
    undated_rows: int = 0  # rows of files without a change time: never linked in time
    generations: int = 0  # embedding generations among the rows
    per_kind: dict[str, LinkStats] = field(default_factory=dict)
    linked_chunks: int = 0
    max_links_per_chunk: int = 0
    seconds: float = 0.0
    reason: str | None = None  # why nothing was stored
    mode: str | None = None  # MODE_FULL or MODE_INCREMENTAL (None: nothing computed)
    full_reason: str | None = None  # why a run computed everything
    vectors_read: int = 0  # rows whose vectors came from Chroma (the rest: the snapshot)
    recomputed_chunks: int = 0  # chunks whose lists were computed afresh (incremental)
    rows_written: int = 0  # (chunk, kind) link rows written or deleted


# What a links run reports as it goes: (stage, rows done, rows in the stage).
LinkProgress = Callable[[str, int, int], None]
STAGE_READ = "rows read"
STAGE_TEMPORAL = "temporal pass"
STAGE_SEMANTIC = "semantic pass"
STAGE_STORE = "storing"


def compute_lists(
    rows: RepoRows,
    times: Sequence[float],
    params: LinkParams,
    progress: LinkProgress | None = None,
) -> dict[str, LinkLists]:
    """Both passes over the rows, as lists over row indices: temporal by file change time,
    semantic within each embedding generation. Built from the passes' arrays, never a
    tuple per link (at 32,000 rows each pass keeps ~640,000 links). ``progress`` hears
    the end of the temporal pass and each semantic block."""
    n = len(rows.ids)
    tell = progress or (lambda _stage, _done, _total: None)
    ids, temporal = temporal_pairs(
        list(zip(rows.ids, rows.kinds, times, strict=True)),
        window_seconds=params.window_seconds,
        per_chunk=params.per_chunk,
        candidate_window=params.candidate_window,
    )
    if len(ids) != n:
        raise ValueError(f"{n - len(ids)} row id(s) repeat: rows are one per chunk")
    tell(STAGE_TEMPORAL, n, n)
    semantic: list[LinkPairs] = []
    done_before = 0
    for positions in generation_groups(zip(rows.ids, rows.generations, strict=True)).values():
        at = np.asarray(positions, dtype=np.int64)
        base = done_before
        _, pairs = semantic_pairs(
            [rows.ids[p] for p in positions],
            rows.vectors[at],
            threshold=params.threshold,
            top_k=params.top_k,
            block_rows=params.block_rows,
            on_block=lambda done, _count, base=base: tell(STAGE_SEMANTIC, base + done, n),
        )
        done_before += len(positions)
        semantic.append(LinkPairs(at[pairs.src], at[pairs.dst], pairs.weight))
    return {
        LINK_TEMPORAL: LinkLists.from_pairs(n, temporal),
        LINK_SEMANTIC: LinkLists.from_pairs(n, LinkPairs.concat(semantic)),
    }


def _stats(lists: LinkLists) -> LinkStats:
    sizes = lists.lengths()
    return LinkStats(
        chunks=lists.rows,
        linked_chunks=int(np.count_nonzero(sizes)),
        links=int(sizes.sum()),
        max_links_per_chunk=int(sizes.max(initial=0)),
    )


def _unchanged(
    previous: Mapping[str, Any] | None,
    generation: Mapping[str, Any],
    params: LinkParams,
    present: Callable[[], int],
) -> bool:
    """Same declared generation, same rows present, same parameters: the stored links are
    these links. A sweep with nothing new costs one id check, not a re-link."""
    return (
        previous is not None
        and previous["revision"] == generation["revision"]
        and previous["generation_recorded_at"] == generation["recorded_at"]
        and previous["params"] == params.as_dict()
        and previous["chunks"] == present()
    )


def _try_incremental(
    previous: Mapping[str, Any] | None,
    params: LinkParams,
    snapshot: Snapshot | None,
    rows: RepoRows,
    times: Sequence[float],
) -> tuple[Outcome | None, str | None]:
    """The incremental outcome, or None and why the run must compute everything."""
    if previous is None:
        return None, "no previous link set"
    if previous["params"] != params.as_dict():
        return None, "parameters changed"
    if snapshot is None or snapshot.link_set is None:
        return None, "no usable snapshot"
    if not same_link_set(snapshot.link_set, previous) or previous["chunks"] != len(snapshot.ids):
        return None, "the snapshot is of another link set"
    try:
        return run_incremental(snapshot, rows, times, params), None
    except NeedsFull as why:
        return None, str(why)
    except ValueError as why:  # an inconsistent snapshot: never a wrong link
        return None, f"snapshot inconsistent ({why})"


@dataclass
class _Stored:
    stored: bool
    rows_written: int
    outcome: Outcome | None  # None: the lists were stored whole
    moved: bool = False  # an update found the link set moved and stored whole instead


def _store_lists(
    ledger: Ledger,
    tenant_id: str,
    repo_slug: str,
    rows: RepoRows,
    lists: dict[str, LinkLists],
    outcome: Outcome | None,
    previous: Mapping[str, Any] | None,
    counts: dict[str, int],
    facts: dict[str, Any],
) -> _Stored:
    """Write only the changed rows (incremental) or the whole link set (full); ``facts``:
    the set's revision, generation time, chunks, parameters and time."""
    if outcome is not None:
        assert previous is not None
        try:
            changed = outcome.changed
            stored = update_links(
                ledger, tenant_id, repo_slug, changed, expected=previous, counts=counts, **facts
            )
            return _Stored(stored, sum(len(by_chunk) for by_chunk in changed.values()), outcome)
        except LinkSetMoved:
            # Another run stored links meanwhile. These lists are still the full result over
            # these rows (they follow from the snapshot's, a full result over its rows), so
            # they are stored whole.
            pass
    by_kind = {kind: lists[kind].as_links(rows.ids) for kind in LINK_KINDS}
    stored = replace_links(ledger, tenant_id, repo_slug, by_kind, **facts)
    rows_written = sum(int(np.count_nonzero(lists[k].lengths())) for k in LINK_KINDS)
    return _Stored(stored, rows_written, None, moved=outcome is not None)


def _save(
    path: Path,
    tenant_id: str,
    repo_slug: str,
    rows: RepoRows,
    times: Sequence[float],
    lists: dict[str, LinkLists],
    link_set_now: dict[str, Any] | None,
) -> None:
    """The snapshot the next run starts from: the rows always, the lists only if stored."""
    stored = link_set_now is not None
    save_snapshot(
        path,
        tenant_id,
        repo_slug,
        Snapshot(
            ids=rows.ids,
            generations=rows.generations,
            vectors=rows.vectors,
            link_set=link_set_now,
            kinds=rows.kinds if stored else None,
            times=np.asarray(times, dtype=np.float64) if stored else None,
            lists=lists if stored else None,
        ),
    )


def _report(
    base: LinkReport,
    rows: RepoRows,
    times: Sequence[float],
    lists: dict[str, LinkLists],
    **facts: Any,
) -> LinkReport:
    per_chunk = lists[LINK_SEMANTIC].lengths() + lists[LINK_TEMPORAL].lengths()
    return replace(
        base,
        rows=len(rows.ids),
        undated_rows=sum(1 for at in times if math.isnan(at)),
        generations=len(set(rows.generations)),
        per_kind={kind: _stats(lists[kind]) for kind in LINK_KINDS},
        linked_chunks=int(np.count_nonzero(per_chunk)),
        max_links_per_chunk=int(per_chunk.max(initial=0)),
        reason=None if base.stored else "the declared generation moved on while linking",
        **facts,
    )


def link_repo(
    ledger: Ledger,
    store: ChromaStore,
    tenant_id: str,
    repo_slug: str,
    params: LinkParams,
    *,
    now: float,
    cache_dir: Path | None = None,
    progress: LinkProgress | None = None,
) -> LinkReport:
    """Compute and store the repo's links for its current declared generation. ``cache_dir``
    holds the snapshots (default ``default_cache_dir(ledger)``; without one every run is
    full); the report's ``mode`` and ``full_reason`` say which path ran and why."""
    started = time.perf_counter()
    generation = ledger.declared_generation(tenant_id, repo_slug)
    if generation is None:
        return LinkReport(tenant_id, repo_slug, None, False, reason="no declared generation")
    declared = ledger.declared_chunks(tenant_id, repo_slug)
    previous = link_set(ledger, tenant_id, repo_slug)
    if _unchanged(
        previous, generation, params, lambda: len(store.present_ids(c.chunk_id for c in declared))
    ):
        return LinkReport(tenant_id, repo_slug, generation["revision"], False, reason="unchanged")
    envelope = ledger.envelope(tenant_id, repo_slug) or {"paths": []}
    changed_at = {p["path"]: p.get("changed_at") for p in envelope["paths"]}

    cache_dir = cache_dir if cache_dir is not None else default_cache_dir(ledger)
    path = snapshot_path(cache_dir, tenant_id, repo_slug) if cache_dir is not None else None
    snapshot = load_snapshot(path, tenant_id, repo_slug) if path is not None else None
    rows, vectors_read = gather_rows(
        store,
        [(c.chunk_id, c.kind, c.source_path) for c in declared],
        tenant_id=tenant_id,
        repo_slug=repo_slug,
        snapshot=snapshot,
    )
    times = row_times(rows, changed_at)
    n = len(rows.ids)
    if progress is not None:
        progress(STAGE_READ, n, n)

    outcome, full_reason = _try_incremental(previous, params, snapshot, rows, times)
    lists = outcome.lists if outcome is not None else compute_lists(rows, times, params, progress)
    if progress is not None:
        progress(STAGE_STORE, n, n)
    counts = {kind: int(lists[kind].lengths().sum()) for kind in LINK_KINDS}
    facts: dict[str, Any] = {
        "revision": generation["revision"],
        "generation_recorded_at": generation["recorded_at"],
        "chunks": n,
        "params": params.as_dict(),
        "now": now,
    }
    done = _store_lists(ledger, tenant_id, repo_slug, rows, lists, outcome, previous, counts, facts)
    if done.moved:
        full_reason = "the link set moved during the run"
    stored = done.stored
    if path is not None and (stored or snapshot is None or snapshot.link_set is None):
        link_set_now = link_set_values(
            generation["revision"], generation["recorded_at"], now, n, counts, params.as_dict()
        )
        _save(path, tenant_id, repo_slug, rows, times, lists, link_set_now if stored else None)

    return _report(
        LinkReport(tenant_id, repo_slug, generation["revision"], stored),
        rows,
        times,
        lists,
        declared_chunks=len(declared),
        seconds=time.perf_counter() - started,
        mode=MODE_INCREMENTAL if done.outcome is not None else MODE_FULL,
        full_reason=full_reason,
        vectors_read=vectors_read,
        recomputed_chunks=done.outcome.recomputed if done.outcome is not None else n,
        rows_written=done.rows_written if stored else 0,
    )
