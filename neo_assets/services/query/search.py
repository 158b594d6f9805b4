"""The one query library every surface uses (HTTP, MCP, CLI): search, one chunk, its
related chunks, the caller's repos. Only the caller's tenant, only the repos its token
may read, only the true knowledge base (``truth.TruthCache``).

A search embeds the question with the resident provider, asks Chroma for vector
candidates (over-fetched, then kept only when served and matching the path glob), adds
rows that name the question's identifiers exactly (``where`` on name / qualifiedName,
``where_document`` ``$contains``), and fuses both rankings (``core.query.ranking``).
"""

import fnmatch
from collections.abc import Iterable, Sequence
from typing import Any

import anyio
import numpy as np

from neo_assets.core import codes
from neo_assets.core.query.ranking import fuse, lexical_score, query_terms
from neo_assets.core.query.request import QueryInputError, SearchRequest, parse_chunk_id
from neo_assets.core.query.truth import SERVED_DECLARED, SERVED_NOTHING, SERVED_PREVIOUS
from neo_assets.embedding.cancel import CancelScope
from neo_assets.services.query.serving import Resident, ServingTarget, serving_target
from neo_assets.services.query.truth import TruthCache, TruthView
from neo_assets.store.links import neighbours as linked_neighbours

# Vector candidates asked per result wanted, and the most ever asked at once.
OVERFETCH = 4
MIN_FETCH = 40
MAX_FETCH = 4000
# Rows read per exact-match term (by name, and by text).
LEXICAL_PER_TERM = 100
EXPAND_PER_HIT = 5
DEFAULT_RELATED = 10


def forbidden(repo: str) -> QueryInputError:
    return QueryInputError(
        codes.AUTH_FORBIDDEN,
        f"repo {repo[:64]!r} is not readable with this token: ask for one of your tenant's "
        "repos (GET /v1/repos lists them)",
        "repo",
        status=403,
    )


def not_found(chunk_id: str) -> QueryInputError:
    # The same answer for an unknown id and another tenant's: nothing is revealed.
    return QueryInputError(
        codes.QUERY_NOT_FOUND, f"no chunk {chunk_id} among your repos", "id", status=404
    )


def _result(row: dict[str, Any], score: float, similarity: float | None, lexical: float):
    md = row["metadata"]
    return {
        "id": row["id"],
        "score": round(float(score), 6),
        "similarity": None if similarity is None else round(float(similarity), 6),
        "lexical": lexical,
        "document": row["document"],
        "metadata": md,
        "repo": md.get("repoSlug"),
        "path": md.get("sourcePath"),
        "startLine": md.get("startLine"),
        "endLine": md.get("endLine"),
        "kind": md.get("kind"),
        "name": md.get("name"),
        "qualifiedName": md.get("qualifiedName"),
        "language": md.get("language"),
        "revision": md.get("revision"),
    }


class QueryService:
    """Queries over one ``Resident``; safe to share between concurrent requests."""

    def __init__(self, resident: Resident) -> None:
        self.resident = resident
        self.truth = TruthCache(resident.settings.serve.truth_recheck_s)

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
    ) -> dict[str, Any]:
        repos = self.scope(tenant_id, token_repos, request.repo)
        if not repos:
            return {"results": []}
        target = serving_target(self.resident, tenant_id, request.repo)
        vectors = await target.provider.embed([request.query], CancelScope(label="query"), "query")
        use_hybrid = self.resident.settings.serve.hybrid if hybrid is None else hybrid
        results = await anyio.to_thread.run_sync(
            self._search_sync, target, tenant_id, request, repos, vectors[0], use_hybrid
        )
        if request.expand:
            view = await anyio.to_thread.run_sync(self._view, target, tenant_id)
            await anyio.to_thread.run_sync(
                self._attach_neighbours, target, view, tenant_id, repos, results, EXPAND_PER_HIT
            )
        return {"results": results}

    def _where(
        self, tenant_id: str, generation: str, repos: Sequence[str], request: SearchRequest
    ) -> dict[str, Any]:
        clauses: list[dict[str, Any]] = [
            {"tenantId": {"$eq": tenant_id}},
            {"embeddingGeneration": {"$eq": generation}},
            {"repoSlug": {"$eq": repos[0]}}
            if len(repos) == 1
            else {"repoSlug": {"$in": list(repos)}},
        ]
        if request.language is not None:
            clauses.append({"language": {"$eq": request.language}})
        if request.kind is not None:
            clauses.append({"kind": {"$eq": request.kind}})
        return {"$and": clauses}

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
        where = self._where(tenant_id, target.embedding_generation, repos, request)
        repo_set = set(repos)

        def keep(row: dict[str, Any]) -> bool:
            md = row["metadata"]
            return (
                row["id"] in view.ids
                and md.get("tenantId") == tenant_id
                and md.get("repoSlug") in repo_set
                and (
                    request.path is None
                    or fnmatch.fnmatchcase(str(md.get("sourcePath", "")), request.path)
                )
            )

        fetch = min(max(request.k * OVERFETCH, MIN_FETCH), MAX_FETCH)
        while True:
            hits = target.store.query(vector, where=where, k=fetch)
            kept = [h for h in hits if keep(h)]
            if len(kept) >= request.k or len(hits) < fetch or fetch >= MAX_FETCH:
                break
            fetch = min(fetch * 8, MAX_FETCH)
        rows = {h["id"]: h for h in kept}
        similarity = {h["id"]: h["score"] for h in kept}
        vector_ids = [h["id"] for h in kept]
        if not hybrid:
            return [
                _result(rows[i], similarity[i], similarity[i], 0.0) for i in vector_ids[: request.k]
            ]
        terms = query_terms(request.query)
        for row in self._lexical_rows(target, where, terms, vector):
            if row["id"] not in rows and keep(row):
                rows[row["id"]] = row
                similarity[row["id"]] = row["score"]
        lexical = {
            rid: lexical_score(row["document"] or "", row["metadata"], terms)
            for rid, row in rows.items()
        }
        return [
            _result(rows[rid], score, similarity.get(rid), lexical[rid])
            for rid, score in fuse(vector_ids, lexical, request.k)
        ]

    def _lexical_rows(
        self, target: ServingTarget, where: dict[str, Any], terms: Iterable[str], vector: np.ndarray
    ) -> list[dict[str, Any]]:
        """Rows naming a term exactly (chunk name, qualified name, or text), with their
        cosine similarity to the question computed from their stored embeddings."""
        found: dict[str, dict[str, Any]] = {}
        collection = target.store.collection
        for term in terms:
            asks = [
                {"where": {"$and": [*where["$and"], {"name": {"$eq": term}}]}},
                {"where": {"$and": [*where["$and"], {"qualifiedName": {"$eq": term}}]}},
                {"where": where, "where_document": {"$contains": term}},
            ]
            for ask in asks:
                got = collection.get(
                    **ask,
                    limit=LEXICAL_PER_TERM,
                    include=["metadatas", "documents", "embeddings"],
                )
                for rid, md, doc, emb in zip(
                    got["ids"], got["metadatas"], got["documents"], got["embeddings"], strict=True
                ):
                    if rid not in found:
                        found[rid] = {
                            "id": rid,
                            "metadata": dict(md or {}),
                            "document": doc,
                            "score": _cosine(vector, emb),
                        }
        return list(found.values())

    # ------------------------------------------------------------------ neighbours
    def _attach_neighbours(
        self,
        target: ServingTarget,
        view: TruthView,
        tenant_id: str,
        repos: Sequence[str],
        results: list[dict[str, Any]],
        per_hit: int,
    ) -> None:
        found = self._neighbours(
            target, view, tenant_id, repos, [r["id"] for r in results], per_hit
        )
        for r in results:
            r["neighbours"] = found.get(r["id"], [])

    def _neighbours(
        self,
        target: ServingTarget,
        view: TruthView,
        tenant_id: str,
        repos: Sequence[str],
        ids: list[str],
        per_hit: int,
    ) -> dict[str, list[dict[str, Any]]]:
        """Linked chunks of ``ids`` read from the tenant's links, kept only when served and
        in a readable repo (each row re-checked to carry the tenant)."""
        linked = linked_neighbours(self.resident.ledger, tenant_id, ids, limit=per_hit)
        wanted = [
            n.neighbour_id for ns in linked.values() for n in ns if n.neighbour_id in view.ids
        ]
        rows = target.store.get_rows(list(dict.fromkeys(wanted)), include_documents=True)
        out: dict[str, list[dict[str, Any]]] = {}
        for cid, ns in linked.items():
            kept = []
            for n in ns:
                row = rows.get(n.neighbour_id)
                if row is None or n.neighbour_id not in view.ids:
                    continue
                md = row["metadata"]
                if md.get("tenantId") != tenant_id or md.get("repoSlug") not in repos:
                    continue
                kept.append(
                    {
                        **_result(row, n.weight, None, 0.0),
                        "linkKind": n.link_kind,
                    }
                )
            out[cid] = kept
        return out

    # ------------------------------------------------------------------ chunks
    def _served_row(
        self, tenant_id: str, token_repos: Sequence[str], chunk_id: Any
    ) -> tuple[ServingTarget, TruthView, list[str], dict[str, Any]]:
        cid = parse_chunk_id(chunk_id)
        repos = self.readable_repos(tenant_id, token_repos)
        target = serving_target(self.resident, tenant_id, None)
        view = self._view(target, tenant_id)
        if cid not in view.ids:
            raise not_found(cid)
        row = target.store.get_rows([cid], include_documents=True).get(cid)
        if (
            row is None
            or row["metadata"].get("tenantId") != tenant_id
            or row["metadata"].get("repoSlug") not in repos
        ):
            raise not_found(cid)
        return target, view, repos, row

    def chunk(self, tenant_id: str, token_repos: Sequence[str], chunk_id: Any) -> dict[str, Any]:
        _target, _view, _repos, row = self._served_row(tenant_id, token_repos, chunk_id)
        return _result(row, 1.0, None, 0.0)

    def related(
        self,
        tenant_id: str,
        token_repos: Sequence[str],
        chunk_id: Any,
        limit: int = DEFAULT_RELATED,
    ) -> dict[str, Any]:
        if type(limit) is not int or not 1 <= limit <= 50:
            raise QueryInputError(
                codes.QUERY_INVALID, "limit: must be an integer from 1 to 50", "limit"
            )
        target, view, repos, row = self._served_row(tenant_id, token_repos, chunk_id)
        found = self._neighbours(target, view, tenant_id, repos, [row["id"]], limit)
        return {"id": row["id"], "neighbours": found.get(row["id"], [])}

    def repos(self, tenant_id: str, token_repos: Sequence[str]) -> dict[str, Any]:
        """The caller's repos: their sweep state and what is served of each."""
        target = serving_target(self.resident, tenant_id, None)
        view = self._view(target, tenant_id)
        out = []
        for slug in self.readable_repos(tenant_id, token_repos):
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
                }
            )
        return {"tenantId": tenant_id, "repos": out}


def _cosine(vector: np.ndarray, other: Any) -> float:
    a = np.asarray(vector, dtype=np.float32)
    b = np.asarray(other, dtype=np.float32)
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / denom if denom else 0.0
