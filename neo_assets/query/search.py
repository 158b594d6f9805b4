"""The one query library every surface uses (HTTP, MCP, CLI): search, one chunk, its related
chunks, the caller's repos. Only the caller's tenant, only the repos its token may read,
only the true knowledge base (``truth.TruthCache``); rows are re-checked to be the
caller's. Design: docs/design/query.md"""

import heapq
from collections.abc import Sequence
from typing import Any

import anyio
import numpy as np

from neo_assets.core import codes
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.failures import EmbedFailure
from neo_assets.generations.records import repo_generations
from neo_assets.generations.serving import GenerationUnavailable
from neo_assets.query.answers import embed_refused, forbidden, result_doc
from neo_assets.query.deadline import checkpoint
from neo_assets.query.freshness import HeadCache
from neo_assets.query.related import RelatedReads
from neo_assets.query.rules.filters import kept
from neo_assets.query.rules.freshness import freshness
from neo_assets.query.rules.fusion import fuse_lists, keeps_first
from neo_assets.query.rules.ranking import (
    DEFAULT_RANKING,
    RankingOptions,
    above_floor,
    asks_for_secondary,
    fuse,
    query_terms,
    query_tokens,
)
from neo_assets.query.rules.readiness import (
    RepoHolding,
    missing_from_store,
    missing_store_message,
)
from neo_assets.query.rules.request import QueryInputError, SearchRequest
from neo_assets.query.rules.truth import SERVED_DECLARED, SERVED_NOTHING, SERVED_PREVIOUS
from neo_assets.query.serving import (
    QueryUnavailable,
    Resident,
    ServingTarget,
    pinned_plan,
    serving_targets,
    unavailable_notice,
)
from neo_assets.query.truth import TruthCache, TruthView
from neo_assets.query.vector_cache import VectorCache

# Vector candidates asked per result wanted, and the most ever asked at once (always
# with the tenant's where-filter).
OVERFETCH = 4
MIN_FETCH = 40
MAX_FETCH = 4000
# Exact-match candidates fused with the vector list, best lexical scores first.
LEXICAL_CANDIDATES = 100
EXPAND_PER_HIT = 5


class QueryService(RelatedReads):
    """Queries over one ``Resident``; safe to share between concurrent requests."""

    def __init__(self, resident: Resident, *, release_parsers: bool = False) -> None:
        """``release_parsers``: answer as if every parser switch the quality gate holds
        were allowed (the switch's candidate side is measured so)."""
        self.resident = resident
        self.truth = TruthCache(resident.settings.serve.truth_recheck_s, release=release_parsers)
        self.heads = HeadCache()
        self.vectors = VectorCache(int(resident.settings.serve.vector_cache_mb * 1024 * 1024))
        # The ranking steps every search takes (bench/self_eval.py compares them).
        self.ranking: RankingOptions = DEFAULT_RANKING
        # The served ids a request's filters keep, per truth view (a new view, a new map):
        # building the list walks every served facet.
        self._served_lists: dict[str, tuple[TruthView, dict[tuple[Any, ...], list[str]]]] = {}

    def freshness(self, tenant_id: str, slugs: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Per repo: the revision it is indexed at (the ledger's checkpoint), whether its
        declared head has moved on since (``behind``; None for a plain directory or an
        unreadable repo), that head and since when (``query.rules.freshness``)."""
        tenant = self.resident.tenants().tenant(tenant_id)
        declared = {r.slug: r for r in tenant.repos} if tenant is not None else {}
        out = {}
        for slug in dict.fromkeys(slugs):
            repo = declared.get(slug)
            state = self.resident.ledger.repo_state(tenant_id, slug) or {}
            head = self.heads.head(repo.path, repo.ref) if repo is not None else None
            out[slug] = freshness(state.get("last_ingested_rev"), head)
        return out

    def _add_freshness(self, tenant_id: str, results: list[dict[str, Any]]) -> None:
        """Each result's ``behind``, ``head``, ``behindSince`` (of its repo), beside the
        ``revision`` its row was indexed at."""
        fresh = self.freshness(tenant_id, [r["repo"] for r in results if r.get("repo")])
        for r in results:
            f = fresh.get(r.get("repo") or "", freshness(None, None))
            r["behind"], r["head"], r["behindSince"] = f["behind"], f["head"], f["behindSince"]

    # ------------------------------------------------------------------ scope
    def readable_repos(self, tenant_id: str, token_repos: Sequence[str]) -> list[str]:
        tenant = self.resident.tenants().tenant(tenant_id)
        declared = [r.slug for r in tenant.repos] if tenant is not None else []
        return [s for s in declared if not token_repos or s in token_repos]

    def scope(self, tenant_id: str, token_repos: Sequence[str], repo: str | None) -> list[str]:
        """The repos a request reads; 403 for a repo the token may not read."""
        readable = self.readable_repos(tenant_id, token_repos)
        if repo is None:
            return readable
        if repo not in readable:
            raise forbidden(repo)
        return [repo]

    def store_label(self) -> str:
        store = self.resident.settings.store
        return store.chroma_url or str(store.chroma_dir)

    def missing_from_store(
        self, tenant_id: str, view: TruthView, slugs: Sequence[str]
    ) -> list[RepoHolding]:
        """The repos of ``slugs`` the ledger records as swept complete, with chunks, at the
        view's embedding generation, that the store serves nothing of (the ledger is read
        only for repos serving nothing). A generation answering as a fallback before it was
        ever built is not a missing store: it has nothing yet."""
        holdings = []
        complete_at: set[str] | None = None
        for slug in slugs:
            served = view.repos.get(slug)
            if served is not None and served.ids:
                continue
            if complete_at is None:
                generation = view.marker[-1]
                complete_at = {
                    g.repo_slug
                    for g in repo_generations(self.resident.ledger, tenant_id)
                    if g.generation == generation and g.complete
                }
            if slug not in complete_at:
                continue
            state = self.resident.ledger.repo_state(tenant_id, slug) or {}
            revision = state.get("last_ingested_rev")
            chunks = len(self.resident.ledger.declared_chunks(tenant_id, slug)) if revision else 0
            holdings.append(RepoHolding(slug, revision, chunks, 0))
        return missing_from_store(holdings)

    def store_missing(self, tenant_id: str, missing: list[RepoHolding]) -> QueryInputError:
        return QueryInputError(
            codes.QUERY_STORE_MISSING,
            missing_store_message(tenant_id, missing, self.store_label()),
            None,
            status=503,
        )

    def view(self, tenant_id: str) -> TruthView:
        """The tenant's read-side truth now (computed when not cached)."""
        return self._view(serving_targets(self.resident, tenant_id).first, tenant_id)

    def _view(self, target: ServingTarget, tenant_id: str) -> TruthView:
        return self.truth.view(
            self.resident.ledger,
            target.store,
            self.resident.tenants(),
            tenant_id,
            target.embedding_generation,
        )

    # ------------------------------------------------------------------ search
    async def search(
        self,
        tenant_id: str,
        request: SearchRequest,
        token_repos: Sequence[str] = (),
        *,
        hybrid: bool | None = None,
        generation: str | None = None,
    ) -> dict[str, Any]:
        """``generation`` pins one embedding generation (the self-evaluation measures
        one that may not serve yet); by default the tenant's serving plan answers."""
        repos = self.scope(tenant_id, token_repos, request.repo)
        if not repos:
            return {"results": []}
        if generation is None:
            plan = serving_targets(self.resident, tenant_id)
        else:
            plan = pinned_plan(self.resident, generation)
        notices: list[dict[str, Any]] = []
        for target in plan.targets:
            try:
                provider = self.resident.provider_for(target)
                vectors = await provider.embed([request.query], CancelScope(label="query"), "query")
                break
            except EmbedFailure as exc:
                if exc.code == codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL:
                    raise embed_refused(exc) from None  # the question, not the provider
                notices.append(unavailable_notice(target.embedding_generation, target.record, exc))
            except GenerationUnavailable as exc:
                notices.append(unavailable_notice(target.embedding_generation, target.record, exc))
        else:
            raise QueryUnavailable(
                "no embedding generation can embed this query: "
                + "; ".join(n["message"] for n in notices)
                + ". Fix the provider (NEO_EMBEDDING_*) and query again",
                notices,
            )
        use_hybrid = self.resident.settings.serve.hybrid if hybrid is None else hybrid
        # Each thread's wait is abandoned when the request is cancelled (its deadline), so
        # the caller is answered on time; the thread stops at its next ``checkpoint``.
        results = await anyio.to_thread.run_sync(
            self._search_sync,
            target,
            tenant_id,
            request,
            repos,
            vectors[0],
            use_hybrid,
            abandon_on_cancel=True,
        )
        checkpoint("reading the repos' freshness")
        await anyio.to_thread.run_sync(
            self._add_freshness, tenant_id, results, abandon_on_cancel=True
        )
        if request.expand:
            checkpoint("reading linked chunks")
            view = await anyio.to_thread.run_sync(
                self._view, target, tenant_id, abandon_on_cancel=True
            )
            await anyio.to_thread.run_sync(
                self._attach_neighbours,
                target,
                view,
                tenant_id,
                repos,
                results,
                EXPAND_PER_HIT,
                abandon_on_cancel=True,
            )
        checkpoint("answering")
        return {
            "results": results,
            "embeddingGeneration": target.embedding_generation,
            "servingGeneration": plan.serving_generation,
            "notices": notices,
        }

    def _search_sync(
        self,
        target: ServingTarget,
        tenant_id: str,
        request: SearchRequest,
        repos: list[str],
        vector: np.ndarray,
        hybrid: bool,
    ) -> list[dict[str, Any]]:
        view = self._view(target, tenant_id)
        missing = self.missing_from_store(tenant_id, view, repos)
        if missing:  # never an empty answer that looks like a true one
            raise self.store_missing(tenant_id, missing)
        repo_set = set(repos)
        wanted = request.filters

        def keep(rid: str) -> bool:
            # Served ids are the tenant's own (read tenantId-filtered, re-checked): a
            # foreign id has no facet and is dropped here, before anything is read of it.
            facet = view.facets.get(rid)
            return facet is not None and facet.repo in repo_set and kept(facet.values, wanted)

        served = self._served_list(view, repos, request, keep)
        checkpoint("the vector query")
        similarity = self._vector_candidates(
            target, tenant_id, request, repos, vector, keep, served
        )
        vector_ids = sorted(similarity, key=lambda rid: -similarity[rid])
        lexical: dict[str, float] = {}
        options = self.ranking
        parts: dict[str, list[str]] = {}
        if hybrid and options == RankingOptions():
            scored = view.index.scores(query_terms(request.query), repos)
            lexical = {rid: scored[rid] for rid in _best(scored, keep)}
            ranked = fuse(vector_ids, lexical, request.k)
        elif hybrid:
            options = keeps_first(options, [similarity[rid] for rid in vector_ids[:2]])
            ranked, lexical, parts = self._fused(view, request, repos, keep, vector_ids, options)
        else:
            ranked = [(rid, similarity[rid]) for rid in vector_ids[: request.k]]
        wanted = [rid for rid, _ in ranked]
        checkpoint("reading the result rows")
        rows = self._rows(target, wanted)
        out = []
        for rid, score in ranked:
            row = rows.get(rid)
            # Re-checked on the row as read: never another tenant's, never another repo's.
            if row is None or row["metadata"].get("tenantId") != tenant_id:
                continue
            if row["metadata"].get("repoSlug") not in repo_set:
                continue
            sim = similarity.get(rid)
            if sim is None and row.get("embedding") is not None:
                sim = _cosine(vector, row["embedding"])
            result = result_doc(row, score, sim, lexical.get(rid, 0.0))
            if rid in parts:  # a unit stored as parts: the parts that matched, best first
                result["matchedParts"] = parts[rid]
            out.append(result)
        return out

    def _fused(
        self,
        view: TruthView,
        request: SearchRequest,
        repos: list[str],
        keep: Any,
        vector_ids: list[str],
        options: RankingOptions,
    ) -> tuple[list[tuple[str, float]], dict[str, float], dict[str, list[str]]]:
        """(ranked ids with fused scores, lexical scores, matched parts per unit result):
        the vector list fused with exact name matches and, with ``options.bm25``, BM25 over
        the chunk text; tests/docs demoted unless asked for; parts of a unit as one. The
        lexical statistics and BM25's floor are those of the rows the query can return."""
        index = view.index
        scored = index.scores(query_terms(request.query), repos)
        names = _best(scored, keep, index.place)
        lists: list[list[str]] = [vector_ids, names]
        lexical = {rid: scored[rid] for rid in names}
        if options.bm25:
            bm = index.bm25(query_tokens(request.query), repos)
            bm = above_floor({rid: score for rid, score in bm.items() if keep(rid)})
            lists.append(_best(bm, keep, index.place))
        demoted: set[str] = set()
        asks = request.wants("path") is not None or asks_for_secondary(request.query)
        if options.source_prior and not asks:
            demoted = index.secondary
        heads = index.unit_heads if options.units else None
        vector_rank = {rid: i for i, rid in enumerate(vector_ids)}
        fused = fuse_lists(
            lists,
            request.k,
            demoted=demoted,
            unit_head=heads,
            tiebreak=vector_rank,
            weights=options.weights,
            rrf_k=options.rrf_k,
            place=index.place,
            keep_first=options.keep_first,
            keep_within=options.keep_within,
            best_part=index.answers_as_best_part if options.units else frozenset(),
        )
        parts = {
            head: matched for head, _s, matched in fused if heads is not None and head in heads
        }
        return [(head, score) for head, score, _m in fused], lexical, parts

    def _served_list(
        self, view: TruthView, repos: list[str], request: SearchRequest, keep: Any
    ) -> list[str]:
        """The served ids ``keep`` keeps, remembered per tenant's view and filter (at most
        64 filters a tenant)."""
        memo = self._served_lists.get(view.tenant_id)
        if memo is None or memo[0] is not view:  # a tenant's new view drops its old lists
            memo = (view, {})
            self._served_lists[view.tenant_id] = memo
        key = (tuple(sorted(repos)), tuple(sorted(request.filters.items())))
        found = memo[1].get(key)
        if found is None:
            found = [rid for rid in view.facets if keep(rid)]
            if len(memo[1]) >= 64:
                memo[1].clear()
            memo[1][key] = found
        return found

    def _vector_candidates(
        self,
        target: ServingTarget,
        tenant_id: str,
        request: SearchRequest,
        repos: list[str],
        vector: np.ndarray,
        keep: Any,
        served: list[str],
    ) -> dict[str, float]:
        """Nearest served rows (id -> cosine similarity) over the tenant's own served ids in
        the readable repos and the request's facets, scanned exactly in the vector cache
        (the store's id-filtered query for a tenant too large for it); the facets are
        checked again on what comes back."""
        if not served:
            return {}
        wanted = min(len(served), max(request.k * OVERFETCH, MIN_FETCH), MAX_FETCH)
        cached = self.vectors.nearest(target.store.collection, tenant_id, served, vector, wanted)
        if cached is not None:
            return {rid: sim for rid, sim in cached.items() if keep(rid)}
        got = target.store.collection.query(
            query_embeddings=np.asarray([vector], dtype=np.float32),
            n_results=wanted,
            ids=served,
            include=["distances"],
        )
        pairs = zip(got["ids"][0], got["distances"][0], strict=True)
        return {rid: 1.0 - float(d) for rid, d in pairs if keep(rid)}

    def _rows(self, target: ServingTarget, ids: list[str]) -> dict[str, dict[str, Any]]:
        """Metadata, document and stored embedding of ``ids``, in one read."""
        if not ids:
            return {}
        got = target.store.collection.get(ids=ids, include=["metadatas", "documents", "embeddings"])
        return {
            rid: {"id": rid, "metadata": dict(md or {}), "document": doc, "embedding": emb}
            for rid, md, doc, emb in zip(
                got["ids"], got["metadatas"], got["documents"], got["embeddings"], strict=True
            )
        }

    # ------------------------------------------------------------------ neighbours
    def repos(self, tenant_id: str, token_repos: Sequence[str]) -> dict[str, Any]:
        """The caller's repos: their sweep state and what is served of each."""
        target = serving_targets(self.resident, tenant_id).first
        view = self._view(target, tenant_id)
        out = []
        slugs = self.readable_repos(tenant_id, token_repos)
        checkpoint("reading the repos' freshness")
        fresh = self.freshness(tenant_id, slugs)
        for slug in slugs:
            state = self.resident.ledger.repo_state(tenant_id, slug) or {}
            served = view.repos.get(slug)
            paths = dict.fromkeys((SERVED_DECLARED, SERVED_PREVIOUS, SERVED_NOTHING), 0)
            for outcome in served.paths.values() if served is not None else ():
                paths[outcome] += 1
            out.append(
                {
                    "repoSlug": slug,
                    "outcome": state.get("last_outcome"),
                    "lastIngestedRev": state.get("last_ingested_rev"),
                    "embeddingGeneration": target.embedding_generation,
                    "servedRows": len(served.ids) if served is not None else 0,
                    "paths": paths,
                    **fresh[slug],
                }
            )
        checkpoint("answering")
        return {"tenantId": tenant_id, "repos": out}


def _best(scores: dict[str, float], keep: Any, place: Any = None) -> list[str]:
    """The ``LEXICAL_CANDIDATES`` ids ``keep`` keeps of best score (ties by ``place``, a
    row's position, else by id)."""
    kept = (rid for rid in scores if keep(rid))
    order = place or str
    return heapq.nsmallest(LEXICAL_CANDIDATES, kept, key=lambda rid: (-scores[rid], order(rid)))


def _cosine(vector: np.ndarray, other: Any) -> float:
    a = np.asarray(vector, dtype=np.float32)
    b = np.asarray(other, dtype=np.float32)
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / denom if denom else 0.0
