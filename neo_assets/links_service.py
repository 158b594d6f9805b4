"""Glue for the ``chunk_links`` asset: one repo's declared generation in, its links stored.

The chunks are the repo's declared generation (ledger) that are present in the collection
under this tenant and repo, so every link lands on a row a query can show. Times come from
the envelope (commit time of the last commit touching each file), kinds from the declared
chunks, vectors from Chroma by id. The rules live in ``core.links`` and
``core.link_records``; this module only reads, calls them, and stores.
"""

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neo_assets.core.link_records import (
    LINK_KINDS,
    LINK_SEMANTIC,
    LINK_TEMPORAL,
    generation_groups,
    temporal_items,
)
from neo_assets.core.links import (
    SEMANTIC_BLOCK_ROWS,
    TEMPORAL_CANDIDATE_WINDOW,
    Links,
    LinkStats,
    link_stats,
    semantic_links,
    temporal_links,
)
from neo_assets.settings import Settings
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger
from neo_assets.store.links import link_set, replace_links


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
            window_seconds=settings.links_temporal_window_s,
            per_chunk=settings.links_temporal_per_chunk,
            threshold=settings.links_semantic_threshold,
            top_k=settings.links_top_k,
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


@dataclass(frozen=True)
class RepoRows:
    """The declared chunks present in the collection, with what the passes need."""

    ids: list[str]
    kinds: list[str]
    paths: list[str]
    generations: list[str | None]
    vectors: np.ndarray  # (len(ids), d) float32


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
            meta = meta or {}
            if meta.get("tenantId") != tenant_id or meta.get("repoSlug") != repo_slug:
                continue
            ids.append(rid)
            gen = meta.get("embeddingGeneration")
            generations.append(gen if isinstance(gen, str) else None)
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
    items = temporal_items(zip(rows.ids, rows.kinds, rows.paths, strict=True), changed_at)
    return [at for _, _, at in items]


def compute_links(rows: RepoRows, times: Sequence[float], params: LinkParams) -> dict[str, Links]:
    """Both passes over the rows: temporal by file change time, semantic within each
    embedding generation."""
    items = list(zip(rows.ids, rows.kinds, times, strict=True))
    temporal = temporal_links(
        items,
        window_seconds=params.window_seconds,
        per_chunk=params.per_chunk,
        candidate_window=params.candidate_window,
    )
    semantic: Links = {}
    for positions in generation_groups(zip(rows.ids, rows.generations, strict=True)).values():
        semantic.update(
            semantic_links(
                [rows.ids[p] for p in positions],
                rows.vectors[positions],
                threshold=params.threshold,
                top_k=params.top_k,
                block_rows=params.block_rows,
            )
        )
    return {LINK_TEMPORAL: temporal, LINK_SEMANTIC: semantic}


def link_repo(
    ledger: Ledger,
    store: ChromaStore,
    tenant_id: str,
    repo_slug: str,
    params: LinkParams,
    *,
    now: float,
) -> LinkReport:
    """Compute and store the repo's links for its current declared generation."""
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
    rows = read_rows(
        store,
        [(c.chunk_id, c.kind, c.source_path) for c in declared],
        tenant_id=tenant_id,
        repo_slug=repo_slug,
    )
    times = row_times(rows, changed_at)
    by_kind = compute_links(rows, times, params)
    stored = replace_links(
        ledger,
        tenant_id,
        repo_slug,
        by_kind,
        revision=generation["revision"],
        generation_recorded_at=generation["recorded_at"],
        chunks=len(rows.ids),
        params=params.as_dict(),
        now=now,
    )
    totals: dict[str, int] = {}
    for links in by_kind.values():
        for chunk_id, kept in links.items():
            if kept:
                totals[chunk_id] = totals.get(chunk_id, 0) + len(kept)
    return LinkReport(
        tenant_id=tenant_id,
        repo_slug=repo_slug,
        revision=generation["revision"],
        stored=stored,
        declared_chunks=len(declared),
        rows=len(rows.ids),
        undated_rows=sum(1 for at in times if math.isnan(at)),
        generations=len(set(rows.generations)),
        per_kind={kind: link_stats(by_kind[kind]) for kind in LINK_KINDS},
        linked_chunks=len(totals),
        max_links_per_chunk=max(totals.values(), default=0),
        seconds=time.perf_counter() - started,
        reason=None if stored else "the declared generation moved on while linking",
    )
