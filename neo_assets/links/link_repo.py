"""Glue for the ``chunk_links`` asset: one repo's declared generation in, its links stored.

The chunks are the repo's declared generation (ledger) that are present in the collection
under this tenant and repo, so every link lands on a row a query can show. Times come from
the envelope (commit time of the last commit touching each file), kinds from the declared
chunks, vectors from Chroma by id. The rules live in ``links.rules``,
``links.rules.incremental`` and ``links.rules.records``; this module only reads, calls them,
and stores.

A run is proportional to change. Each run leaves a snapshot file (derived data, see
``Snapshot``; by default under ``links-cache/`` beside the SQLite ledger, i.e. in the data
dir): the rows it linked with their vectors, and the lists it stored. The next run reads
from Chroma only the vectors of rows the snapshot lacks (or holds under another embedding
generation), recomputes only the lists the change can reach (``links.rules.incremental``)
and writes only the rows that changed (``links.store.update_links``). Whenever the
snapshot cannot vouch for the stored links (no file, torn, another link set, other
parameters, another set of embedding generations, a large change) the run recomputes
everything, as a first run does, and that full path is the reference the tests hold the
incremental one to: equal bit for bit wherever the full pass is itself reproducible (see
``links.rules.incremental`` on float32 rounding).
"""

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neo_assets.config.settings import Settings
from neo_assets.links.rules.incremental import LinkLists, semantic_update, temporal_changes
from neo_assets.links.rules.passes import (
    SEMANTIC_BLOCK_ROWS,
    TEMPORAL_CANDIDATE_WINDOW,
    LinkPairs,
    LinkStats,
    semantic_pairs,
    temporal_pairs,
)
from neo_assets.links.rules.records import (
    LINK_KINDS,
    LINK_SEMANTIC,
    LINK_TEMPORAL,
    generation_groups,
    temporal_items,
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
    replace_links,
    same_link_set,
    update_links,
)
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger

# Above this share of the rows added or removed, the full passes are cheaper than merging.
INCREMENTAL_MAX_CHANGE = 0.25
_WHERE_PAGE = 20_000
# Rows whose metadata is read to learn which generations to ask for by a where filter.
_GENERATION_SAMPLE = 64

MODE_FULL = "full"
MODE_INCREMENTAL = "incremental"


@dataclass(frozen=True)
class LinkParams:
    window_seconds: float
    per_chunk: int
    threshold: float
    top_k: int
    block_rows: int = SEMANTIC_BLOCK_ROWS

    @classmethod
    def from_settings(cls, settings: Settings) -> "LinkParams":
        return cls(
            window_seconds=settings.links.temporal_window_s,
            per_chunk=settings.links.temporal_per_chunk,
            threshold=settings.links.semantic_threshold,
            top_k=settings.links.top_k,
        )

    @property
    def candidate_window(self) -> int:
        # The pass needs per_chunk <= candidate_window to find every chunk's best links.
        return max(TEMPORAL_CANDIDATE_WINDOW, self.per_chunk)

    def as_dict(self) -> dict[str, Any]:
        return {
            "windowSeconds": self.window_seconds,
            "perChunk": self.per_chunk,
            "candidateWindow": self.candidate_window,
            "threshold": self.threshold,
            "topK": self.top_k,
            "blockRows": self.block_rows,
        }


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


@dataclass(frozen=True)
class RepoRows:
    """The declared chunks present in the collection, with what the passes need."""

    ids: list[str]
    kinds: list[str]
    paths: list[str]
    generations: list[str | None]
    vectors: np.ndarray  # (len(ids), d) float32


def _contained(meta: Mapping[str, Any] | None, tenant_id: str, repo_slug: str) -> bool:
    meta = meta or {}
    return meta.get("tenantId") == tenant_id and meta.get("repoSlug") == repo_slug


def _generation(meta: Mapping[str, Any] | None) -> str | None:
    gen = (meta or {}).get("embeddingGeneration")
    return gen if isinstance(gen, str) else None


def read_rows(
    store: ChromaStore,
    declared: Sequence[tuple[str, str, str]],
    *,
    tenant_id: str,
    repo_slug: str,
) -> RepoRows:
    """Fetch ``(chunk_id, kind, source_path)`` rows by id, in the store's batch size.
    A row is kept only when its stamps name this tenant and repo."""
    by_id = {cid: (kind, path) for cid, kind, path in declared}
    wanted = list(by_id)
    ids: list[str] = []
    generations: list[str | None] = []
    vectors: list[np.ndarray] = []
    for start in range(0, len(wanted), store.max_batch):
        got = store.collection.get(
            ids=wanted[start : start + store.max_batch], include=["embeddings", "metadatas"]
        )
        embeddings = got.get("embeddings")
        if embeddings is None or len(got["ids"]) == 0:
            continue
        for rid, meta, vector in zip(got["ids"], got["metadatas"], embeddings, strict=True):
            if not _contained(meta, tenant_id, repo_slug):
                continue
            ids.append(rid)
            generations.append(_generation(meta))
            vectors.append(np.asarray(vector, dtype=np.float32))
    matrix = np.vstack(vectors) if vectors else np.zeros((0, 0), dtype=np.float32)
    return RepoRows(
        ids=ids,
        kinds=[by_id[i][0] for i in ids],
        paths=[by_id[i][1] for i in ids],
        generations=generations,
        vectors=matrix,
    )


def row_times(rows: RepoRows, changed_at: Mapping[str, float | None]) -> list[float]:
    """Each row's file change time (NaN when unobserved: never linked in time)."""
    paths = list(dict.fromkeys(rows.paths))  # the rule once per file, not once per chunk
    items = temporal_items(((path, "", path) for path in paths), changed_at)
    by_path = {path: at for path, _, at in items}
    return [by_path[path] for path in rows.paths]


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


def _ids_where(store: ChromaStore, where: Mapping[str, Any]) -> set[str]:
    """The ids of every row matching ``where`` (no metadata, no vectors: cheap)."""
    found: set[str] = set()
    offset = 0
    while True:
        got = store.collection.get(where=dict(where), include=[], limit=_WHERE_PAGE, offset=offset)
        found.update(got["ids"])
        if len(got["ids"]) < _WHERE_PAGE:
            return found
        offset += _WHERE_PAGE


def _where_generation(tenant_id: str, repo_slug: str, generation: str) -> dict[str, Any]:
    return {
        "$and": [
            {"tenantId": tenant_id},
            {"repoSlug": repo_slug},
            {"embeddingGeneration": generation},
        ]
    }


def _read_vectors(store: ChromaStore, ids: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The vectors of those ``ids`` the collection holds (no metadata: its stamps were
    checked by a ``where`` filter), in the order of ``ids``; written into one matrix as
    they come, so the rows are held once."""
    position = {cid: i for i, cid in enumerate(ids)}
    matrix: np.ndarray | None = None
    held = np.zeros(len(ids), dtype=bool)
    for start in range(0, len(ids), store.max_batch):
        got = store.collection.get(
            ids=list(ids[start : start + store.max_batch]), include=["embeddings"]
        )
        embeddings = got.get("embeddings")
        if embeddings is None or len(got["ids"]) == 0:
            continue
        block = np.asarray(embeddings, dtype=np.float32)
        if matrix is None:
            matrix = np.empty((len(ids), block.shape[1]), dtype=np.float32)
        at = np.fromiter((position[rid] for rid in got["ids"]), np.int64, len(got["ids"]))
        matrix[at] = block
        held[at] = True
    if matrix is None:
        return [], np.zeros((0, 0), dtype=np.float32)
    if held.all():
        return list(ids), matrix
    return [cid for cid, ok in zip(ids, held.tolist(), strict=True) if ok], matrix[held]


def gather_rows(
    store: ChromaStore,
    declared: Sequence[tuple[str, str, str]],
    *,
    tenant_id: str,
    repo_slug: str,
    snapshot: Snapshot | None,
) -> tuple[RepoRows, int]:
    """The rows ``read_rows`` gives (same rows, same vectors), sorted by id, with vectors
    from ``snapshot`` where it holds the row under the generation the collection holds now,
    and the number of rows read from Chroma.

    Which rows stand under which generation is asked per generation, by id only: the ids the
    collection holds under this tenant, repo and generation (stamps checked by Chroma's
    filter, as ``read_rows`` checks them). The generations asked are the snapshot's and
    those a small sample of the other rows' metadata names. A standing row the snapshot
    holds under that generation keeps its vector; the other standing rows' vectors are
    read without metadata. Only the rows no generation covers (absent, stamped for another
    repo, unstamped) are read with their metadata, row by row.

    Why not read every row with its metadata: at 32,000 rows those replies grew the process
    by 90-290 MB (held by the allocator after Chroma's reader threads freed them) against
    ~16 MB for the vectors alone (docs/performance.md)."""
    by_id = {cid: (kind, path) for cid, kind, path in declared}
    at = {cid: i for i, cid in enumerate(snapshot.ids)} if snapshot is not None else {}
    standing: dict[str, str] = {}  # declared id -> the generation it stands under
    asked: set[str] = set()
    pending = sorted({g for g in snapshot.generations if g is not None}) if snapshot else []
    while True:
        for gen in pending:
            asked.add(gen)
            where = _where_generation(tenant_id, repo_slug, gen)
            standing.update((cid, gen) for cid in _ids_where(store, where) if cid in by_id)
        sample = [cid for cid in by_id if cid not in standing][:_GENERATION_SAMPLE]
        if not sample:
            break
        got = store.collection.get(ids=sample, include=["metadatas"])
        named = {
            _generation(meta)
            for meta in got["metadatas"] or ()
            if _contained(meta, tenant_id, repo_slug)
        }
        pending = sorted(g for g in named if g is not None and g not in asked)
        if not pending:
            break  # the rest is read row by row below

    cached = [
        cid
        for cid, gen in standing.items()
        if cid in at and snapshot is not None and snapshot.generations[at[cid]] == gen
    ]
    cached_set = set(cached)
    read_ids, read_vectors = _read_vectors(
        store, [cid for cid in by_id if cid in standing and cid not in cached_set]
    )
    rest = read_rows(
        store,
        [(cid, *by_id[cid]) for cid in by_id if cid not in standing],
        tenant_id=tenant_id,
        repo_slug=repo_slug,
    )
    vectors_read = len(read_ids) + len(rest.ids)
    widths = {m.shape[1] for m in (read_vectors, rest.vectors) if len(m)}
    if snapshot is not None and cached and widths - {snapshot.vectors.shape[1]}:
        # Another dimension than the snapshot's: read everything, as without one.
        return gather_rows(store, declared, tenant_id=tenant_id, repo_slug=repo_slug, snapshot=None)
    if len(widths) > 1:
        raise ValueError(f"the repo's rows hold vectors of {sorted(widths)} dimensions")

    # (id, generation, source, index): source 0 the snapshot, 1 read by id, 2 read row by row.
    found: list[tuple[str, str | None, int, int]] = [
        (cid, standing[cid], 0, at[cid]) for cid in cached
    ]
    found += [(cid, standing[cid], 1, i) for i, cid in enumerate(read_ids)]
    found += [
        (cid, gen, 2, i)
        for i, (cid, gen) in enumerate(zip(rest.ids, rest.generations, strict=True))
    ]
    found.sort(key=lambda row: row[0])
    width = widths.pop() if widths else (snapshot.vectors.shape[1] if cached else 0)
    vectors = np.empty((len(found), width), dtype=np.float32)
    sources = (snapshot.vectors if snapshot is not None else None, read_vectors, rest.vectors)
    for source in range(3):
        rows_at = [n for n, row in enumerate(found) if row[2] == source]
        if rows_at:
            picks = [found[n][3] for n in rows_at]
            vectors[rows_at] = sources[source][picks]  # type: ignore[index]
    ids = [row[0] for row in found]
    rows = RepoRows(
        ids=ids,
        kinds=[by_id[cid][0] for cid in ids],
        paths=[by_id[cid][1] for cid in ids],
        generations=[row[1] for row in found],
        vectors=vectors if found else np.zeros((0, 0), dtype=np.float32),
    )
    return rows, vectors_read


# --- incremental --------------------------------------------------------------------------


class _Full(Exception):
    """The run cannot be incremental; the message says why."""


@dataclass(frozen=True)
class _Outcome:
    lists: dict[str, LinkLists]  # over the new rows
    changed: dict[str, dict[str, list[tuple[str, float]]]]  # kind -> chunk -> new list
    recomputed: int


def _incremental(
    snapshot: Snapshot, rows: RepoRows, times: Sequence[float], params: LinkParams
) -> _Outcome:
    """The links over ``rows`` from the snapshot's stored links over its rows: only the
    lists the change can reach are recomputed (``links.rules.incremental``)."""
    assert snapshot.lists is not None and snapshot.kinds is not None
    assert snapshot.times is not None
    old_ids, old_gens = snapshot.ids, snapshot.generations
    ids, gens = rows.ids, rows.generations
    n, n_old = len(ids), len(old_ids)
    if set(old_gens) != set(gens):
        raise _Full("embedding generations changed")
    new_at = {cid: i for i, cid in enumerate(ids)}
    # Old row -> new row: by id (temporal), by id and generation (semantic).
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
        raise _Full("large change")

    # Semantic, per embedding generation.
    old_semantic = snapshot.lists[LINK_SEMANTIC]
    replaced_s: dict[int, list[tuple[int, float]]] = {}
    recomputed = 0
    for code in np.unique(new_codes).tolist():
        group = np.flatnonzero(new_codes == code)  # one embedding generation's rows
        positions = group.tolist()
        local = np.full(n, -1, dtype=np.int64)
        local[group] = np.arange(len(group))
        remap = np.where(same_gen >= 0, local[np.maximum(same_gen, 0)], -1)
        previous = old_semantic.patch(source_gen[group], remap, {}, strict=False)
        update = semantic_update(
            [ids[p] for p in positions],
            rows.vectors[group],
            previous,
            source_gen[group] < 0,
            threshold=params.threshold,
            top_k=params.top_k,
            block_rows=params.block_rows,
        )
        recomputed += update.recomputed
        for r, kept in update.replaced.items():
            replaced_s[positions[r]] = [(positions[m], w) for m, w in kept]
    semantic = old_semantic.patch(source_gen, same_gen, replaced_s)

    # Temporal: only the chunks whose window the change reaches.
    changes = temporal_changes(
        list(zip(old_ids, snapshot.kinds, snapshot.times.tolist(), strict=True)),
        list(zip(ids, rows.kinds, times, strict=True)),
        window_seconds=params.window_seconds,
        per_chunk=params.per_chunk,
        candidate_window=params.candidate_window,
    )
    recomputed += len(changes)
    replaced_t = {new_at[c]: [(new_at[m], w) for m, w in kept] for c, kept in changes.items()}
    temporal = snapshot.lists[LINK_TEMPORAL].patch(source_id, by_id, replaced_t)

    # What to write: the replaced lists that differ from the stored ones, and the rows of
    # chunks that left.
    changed: dict[str, dict[str, list[tuple[str, float]]]] = {}
    for kind, replaced in ((LINK_SEMANTIC, replaced_s), (LINK_TEMPORAL, replaced_t)):
        before = snapshot.lists[kind]
        out: dict[str, list[tuple[str, float]]] = {}
        for r, kept in replaced.items():
            new = [(ids[m], w) for m, w in kept]
            o = int(source_id[r])
            old = [(old_ids[m], w) for m, w in before.row(o)] if o >= 0 else []
            if new != old:
                out[ids[r]] = new
        lengths = before.lengths()
        for o in np.flatnonzero((by_id < 0) & (lengths > 0)).tolist():
            out[old_ids[o]] = []
        changed[kind] = out
    return _Outcome({LINK_SEMANTIC: semantic, LINK_TEMPORAL: temporal}, changed, recomputed)


def _stats(lists: LinkLists) -> LinkStats:
    sizes = lists.lengths()
    return LinkStats(
        chunks=lists.rows,
        linked_chunks=int(np.count_nonzero(sizes)),
        links=int(sizes.sum()),
        max_links_per_chunk=int(sizes.max(initial=0)),
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
    """Compute and store the repo's links for its current declared generation.

    ``cache_dir`` holds the per-repo snapshots that make a run proportional to change
    (default: ``default_cache_dir(ledger)``; without one every run is full). The report's
    ``mode`` says which path ran and ``full_reason`` why a run was full."""
    started = time.perf_counter()
    generation = ledger.declared_generation(tenant_id, repo_slug)
    if generation is None:
        return LinkReport(tenant_id, repo_slug, None, False, reason="no declared generation")
    declared = ledger.declared_chunks(tenant_id, repo_slug)
    previous = link_set(ledger, tenant_id, repo_slug)
    if (
        previous is not None
        and previous["revision"] == generation["revision"]
        and previous["generation_recorded_at"] == generation["recorded_at"]
        and previous["params"] == params.as_dict()
        and previous["chunks"] == len(store.present_ids(c.chunk_id for c in declared))
    ):
        # Same declared generation, same rows present, same parameters: the stored links
        # are these links. A sweep with nothing new costs one id check, not a re-link.
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

    outcome: _Outcome | None = None
    full_reason: str | None = None
    if previous is None:
        full_reason = "no previous link set"
    elif previous["params"] != params.as_dict():
        full_reason = "parameters changed"
    elif snapshot is None or snapshot.link_set is None:
        full_reason = "no usable snapshot"
    elif not same_link_set(snapshot.link_set, previous) or previous["chunks"] != len(snapshot.ids):
        full_reason = "the snapshot is of another link set"
    else:
        try:
            outcome = _incremental(snapshot, rows, times, params)
        except _Full as why:
            full_reason = str(why)
        except ValueError as why:  # an inconsistent snapshot: never a wrong link
            full_reason = f"snapshot inconsistent ({why})"

    if outcome is not None:
        mode = MODE_INCREMENTAL
        lists = outcome.lists
    else:
        mode = MODE_FULL
        lists = compute_lists(rows, times, params, progress)
    if progress is not None:
        progress(STAGE_STORE, n, n)
    counts = {kind: int(lists[kind].lengths().sum()) for kind in LINK_KINDS}
    store_args: dict[str, Any] = {
        "revision": generation["revision"],
        "generation_recorded_at": generation["recorded_at"],
        "chunks": n,
        "params": params.as_dict(),
        "now": now,
    }
    stored, rows_written = False, 0
    if outcome is not None:
        assert previous is not None
        try:
            stored = update_links(
                ledger,
                tenant_id,
                repo_slug,
                outcome.changed,
                expected=previous,
                counts=counts,
                **store_args,
            )
            rows_written = sum(len(by_chunk) for by_chunk in outcome.changed.values())
        except LinkSetMoved:
            # Another run stored links meanwhile. These lists are still the full result over
            # these rows (they follow from the snapshot's, a full result over its rows), so
            # they are stored whole.
            mode, full_reason = MODE_FULL, "the link set moved during the run"
            outcome = None
    if outcome is None:  # a full run, or an update that found the link set moved
        by_kind = {kind: lists[kind].as_links(rows.ids) for kind in LINK_KINDS}
        stored = replace_links(ledger, tenant_id, repo_slug, by_kind, **store_args)
        rows_written = sum(int(np.count_nonzero(lists[k].lengths())) for k in LINK_KINDS)

    if path is not None and (stored or snapshot is None or snapshot.link_set is None):
        link_set_now = None
        if stored:
            link_set_now = {
                "revision": generation["revision"],
                "generation_recorded_at": float(generation["recorded_at"]),
                "computed_at": float(now),
                "chunks": n,
                "temporal_links": counts[LINK_TEMPORAL],
                "semantic_links": counts[LINK_SEMANTIC],
                "params": params.as_dict(),
            }
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

    per_chunk = lists[LINK_SEMANTIC].lengths() + lists[LINK_TEMPORAL].lengths()
    return LinkReport(
        tenant_id=tenant_id,
        repo_slug=repo_slug,
        revision=generation["revision"],
        stored=stored,
        declared_chunks=len(declared),
        rows=n,
        undated_rows=sum(1 for at in times if math.isnan(at)),
        generations=len(set(rows.generations)),
        per_kind={kind: _stats(lists[kind]) for kind in LINK_KINDS},
        linked_chunks=int(np.count_nonzero(per_chunk)),
        max_links_per_chunk=int(per_chunk.max(initial=0)),
        seconds=time.perf_counter() - started,
        reason=None if stored else "the declared generation moved on while linking",
        mode=mode,
        full_reason=full_reason,
        vectors_read=vectors_read,
        recomputed_chunks=outcome.recomputed if outcome is not None else n,
        rows_written=rows_written if stored else 0,
    )
