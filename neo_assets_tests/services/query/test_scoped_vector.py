"""A search's vector candidates come from a store query that carries the tenant's filter
itself (the served ids of the tenant's readable repos, language, kind): never a query of
the whole collection whose cost and timing depend on other tenants' rows. Real sweeps of
two tenants, real Chroma; the store's query calls are recorded as they reach Chroma."""

import asyncio
from pathlib import Path
from typing import Any

import pytest
from chromadb.api.models.Collection import Collection

from neo_assets.config.settings import load_settings
from neo_assets.core.query.request import SearchRequest
from neo_assets.services.handles import open_ledger, open_store
from neo_assets.services.query import QueryService, Resident
from neo_assets_tests.serve.service_harness import ServedKb


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> ServedKb:
    return ServedKb.build(tmp_path_factory.mktemp("scoped-kb"))


def test_every_vector_query_is_limited_to_the_tenants_served_rows_of_the_request(
    kb: ServedKb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict[str, Any]] = []
    real_query = Collection.query

    def recording(self: Collection, *args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return real_query(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "query", recording)
    with kb.environment():
        settings = load_settings()
        with open_ledger(settings) as ledger, open_store(settings) as store:
            svc = QueryService(Resident(settings, store, ledger))
            # "dispatch_request" is closest to globex's row as much as to acme's.
            got = asyncio.run(svc.search("acme", SearchRequest(query="dispatch_request", k=3)))
            assert got["results"]
            assert {h["metadata"]["tenantId"] for h in got["results"]} == {"acme"}
            generation = got["embeddingGeneration"]
            asyncio.run(
                svc.search(
                    "acme",
                    SearchRequest(query="validator", k=2, language="go", kind="function"),
                    ["widgets"],
                )
            )
    assert len(seen) == 2, seen
    for call in seen:
        assert call.get("ids"), "a vector query without the tenant's filter reached the store"
    with kb.environment():
        settings = load_settings()
        with open_store(settings) as store:
            first = store.get_rows(seen[0]["ids"])
            second = store.get_rows(seen[1]["ids"])
    assert len(first) == len(seen[0]["ids"])
    assert {r["metadata"]["tenantId"] for r in first.values()} == {"acme"}
    assert {r["metadata"]["repoSlug"] for r in first.values()} == {"widgets", "gadgets"}
    assert {r["metadata"]["embeddingGeneration"] for r in first.values()} == {generation}
    assert second and {
        (m["tenantId"], m["repoSlug"], m["language"], m["kind"])
        for m in (r["metadata"] for r in second.values())
    } == {("acme", "widgets", "go", "function")}
