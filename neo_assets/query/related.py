"""One chunk, its related chunks and the links of search hits (``QueryService``'s reads by
id): only a chunk the tenant's truth view serves, in a repo its token may read, each row
re-checked to carry the tenant."""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from neo_assets.core import codes
from neo_assets.links.store import neighbours as linked_neighbours
from neo_assets.query.answers import not_found, result_doc
from neo_assets.query.deadline import checkpoint
from neo_assets.query.rules.request import QueryInputError, parse_chunk_id
from neo_assets.query.serving import ServingTarget, serving_targets
from neo_assets.query.truth import TruthView

if TYPE_CHECKING:
    from neo_assets.query.serving import Resident

DEFAULT_RELATED = 10


class RelatedReads:
    """The reads by chunk id of ``QueryService`` (its scope and truth view)."""

    resident: "Resident"

    def readable_repos(self, tenant_id: str, token_repos: Sequence[str]) -> list[str]:
        raise NotImplementedError

    def _view(self, target: ServingTarget, tenant_id: str) -> TruthView:
        raise NotImplementedError

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
        checkpoint("reading linked rows")
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
                        **result_doc(row, n.weight, None, 0.0),
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
        target = serving_targets(self.resident, tenant_id).first
        view = self._view(target, tenant_id)
        if cid not in view.ids:
            raise not_found(cid)
        checkpoint("reading the chunk")
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
        checkpoint("answering")
        return result_doc(row, 1.0, None, 0.0)

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
        checkpoint("answering")
        return {"id": row["id"], "neighbours": found.get(row["id"], [])}
