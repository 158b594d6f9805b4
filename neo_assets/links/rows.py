"""A repo's rows for a links run: its declared chunks present in the collection, with
vectors from Chroma (by id, with their stamps checked) or from the previous run's snapshot
where it still holds them. The reading half of ``neo_assets.links.link_repo``."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neo_assets.links.rules.records import temporal_items
from neo_assets.links.snapshot import Snapshot
from neo_assets.store.chroma_store import ChromaStore

_WHERE_PAGE = 20_000
# Rows whose metadata is read to learn which generations to ask for by a where filter.
_GENERATION_SAMPLE = 64


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


def _standing_generations(
    store: ChromaStore,
    by_id: Mapping[str, tuple[str, str]],
    *,
    tenant_id: str,
    repo_slug: str,
    snapshot: Snapshot | None,
) -> dict[str, str]:
    """Declared id -> the generation it stands under in the collection: the snapshot's
    generations asked first, then those a small sample of the other rows' metadata names."""
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
    return standing


def _assemble(
    by_id: Mapping[str, tuple[str, str]],
    snapshot: Snapshot | None,
    at: Mapping[str, int],
    standing: Mapping[str, str],
    cached: Sequence[str],
    read: tuple[list[str], np.ndarray],
    rest: RepoRows,
    width: int,
) -> RepoRows:
    """The rows sorted by id, each vector from where it came: the snapshot, read by id, or
    read row by row."""
    read_ids, read_vectors = read
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
    vectors = np.empty((len(found), width), dtype=np.float32)
    sources = (snapshot.vectors if snapshot is not None else None, read_vectors, rest.vectors)
    for source in range(3):
        rows_at = [n for n, row in enumerate(found) if row[2] == source]
        if rows_at:
            picks = [found[n][3] for n in rows_at]
            vectors[rows_at] = sources[source][picks]  # type: ignore[index]
    ids = [row[0] for row in found]
    return RepoRows(
        ids=ids,
        kinds=[by_id[cid][0] for cid in ids],
        paths=[by_id[cid][1] for cid in ids],
        generations=[row[1] for row in found],
        vectors=vectors if found else np.zeros((0, 0), dtype=np.float32),
    )


def gather_rows(
    store: ChromaStore,
    declared: Sequence[tuple[str, str, str]],
    *,
    tenant_id: str,
    repo_slug: str,
    snapshot: Snapshot | None,
) -> tuple[RepoRows, int]:
    """The rows ``read_rows`` gives, sorted by id, with vectors from ``snapshot`` where it holds
    the row under the generation the collection holds now, and how many were read from Chroma.
    Standing rows are found by id per generation and their vectors read without metadata
    (the memory it saves: docs/performance.md, "Link passes")."""
    by_id = {cid: (kind, path) for cid, kind, path in declared}
    at = {cid: i for i, cid in enumerate(snapshot.ids)} if snapshot is not None else {}
    standing = _standing_generations(
        store, by_id, tenant_id=tenant_id, repo_slug=repo_slug, snapshot=snapshot
    )
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
    width = widths.pop() if widths else (snapshot.vectors.shape[1] if cached else 0)
    read = (read_ids, read_vectors)
    rows = _assemble(by_id, snapshot, at, standing, cached, read, rest, width)
    return rows, vectors_read
