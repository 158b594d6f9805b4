"""A search's vector candidates come from the tenant's own rows only: scanned exactly in
the service's vector cache (which reads only the tenant's served rows), or, for a tenant
too large for the cache, from a store query that carries the tenant's filter itself (the
served ids of the tenant's readable repos, language, kind). Never a query of the whole
collection whose cost and timing depend on other tenants' rows. Real sweeps of two
tenants, real Chroma; the store's calls are recorded as they reach Chroma."""

import asyncio
from pathlib import Path
from typing import Any

import pytest
from chromadb.api.models.Collection import Collection

from neo_assets.config.settings import load_settings
from neo_assets.query.rules.request import SearchRequest
from neo_assets.query.search import QueryService
from neo_assets.query.serving import Resident
from neo_assets.services.handles import open_ledger, open_store
from neo_assets_tests.serve.service_harness import ServedKb


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> ServedKb:
    return ServedKb.build(tmp_path_factory.mktemp("scoped-kb"))


def test_every_vector_query_is_limited_to_the_tenants_served_rows_of_the_request(
    kb: ServedKb, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(kb.env, "NEO_SERVE_VECTOR_CACHE_MB", "0")  # the store's path
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
                    SearchRequest(
                        query="validator", k=2, filters={"language": "go", "kind": "function"}
                    ),
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


def _search_both(svc: QueryService) -> list[list[str]]:
    got = asyncio.run(svc.search("acme", SearchRequest(query="dispatch_request", k=3)))
    filtered = asyncio.run(
        svc.search(
            "acme",
            SearchRequest(query="validator", k=2, filters={"language": "go", "kind": "function"}),
            ["widgets"],
        )
    )
    return [[h["id"] for h in got["results"]], [h["id"] for h in filtered["results"]]]


def test_the_vector_cache_reads_only_the_tenants_served_rows_and_answers_as_the_store(
    kb: ServedKb, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(kb.env, "NEO_SERVE_VECTOR_CACHE_MB", "0")
    with kb.environment():
        settings = load_settings()
        with open_ledger(settings) as ledger, open_store(settings) as store:
            through_store = _search_both(QueryService(Resident(settings, store, ledger)))
    monkeypatch.delitem(kb.env, "NEO_SERVE_VECTOR_CACHE_MB")
    queried: list[dict[str, Any]] = []
    read: list[list[str]] = []
    real_query, real_get = Collection.query, Collection.get

    def recording_query(self: Collection, *args: Any, **kwargs: Any) -> Any:
        queried.append(kwargs)
        return real_query(self, *args, **kwargs)

    def recording_get(self: Collection, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("include") == ["embeddings"]:
            read.append(list(kwargs["ids"]))
        return real_get(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "query", recording_query)
    monkeypatch.setattr(Collection, "get", recording_get)
    with kb.environment():
        settings = load_settings()
        with open_ledger(settings) as ledger, open_store(settings) as store:
            svc = QueryService(Resident(settings, store, ledger))
            cached = _search_both(svc)
            again = _search_both(svc)
            rows = store.get_rows([rid for batch in read for rid in batch])
    assert not queried, "the cache path asked the store's vector index"
    assert cached == through_store == again
    assert read and {r["metadata"]["tenantId"] for r in rows.values()} == {"acme"}
    assert svc.vectors.fetched == len(rows)  # each row read once: the second pass read none
