"""The service's vector cache over a real Chroma collection: exact answers from the
tenant's rows alone, each vector read once, tenants out least recently used first, and
a tenant too large for the budget handed back to the store."""

from pathlib import Path

import chromadb
import numpy as np
import pytest

from neo_assets.query.vector_cache import VectorCache


@pytest.fixture()
def collection(tmp_path: Path):
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    coll = client.create_collection("vectors", metadata={"hnsw:space": "cosine"})
    rng = np.random.default_rng(7)
    for tenant in ("a", "b"):
        vectors = rng.normal(size=(300, 8)).astype(np.float32)
        coll.add(ids=[f"{tenant}{i:04d}" for i in range(300)], embeddings=vectors)
    return coll


def _exact(coll, ids: list[str], vector: np.ndarray, n: int) -> list[str]:
    got = coll.get(ids=ids, include=["embeddings"])
    m = np.asarray(got["embeddings"], dtype=np.float32)
    sims = (m / np.linalg.norm(m, axis=1, keepdims=True)) @ (vector / np.linalg.norm(vector))
    return [got["ids"][i] for i in np.argsort(-sims, kind="stable")[:n]]


def test_answers_exactly_from_the_served_rows_and_reads_each_vector_once(collection) -> None:
    cache = VectorCache(10 * 1024 * 1024)
    served = [f"a{i:04d}" for i in range(0, 300, 2)]  # half of a's rows are served
    probe = np.asarray(collection.get(ids=["b0001"], include=["embeddings"])["embeddings"][0])
    got = cache.nearest(collection, "a", served, probe, 10)
    assert got is not None and set(got) <= set(served)  # b's own row is not a candidate
    assert list(got) == _exact(collection, served, probe, 10)
    assert cache.fetched == len(served)
    more = served + ["a0001", "a0003"]  # the view grows: only the new ids are read
    cache.nearest(collection, "a", more, probe, 10)
    assert cache.fetched == len(served) + 2
    cache.nearest(collection, "a", more, probe, 10)
    assert cache.fetched == len(served) + 2


def test_an_id_missing_from_the_store_is_skipped_not_an_error(collection) -> None:
    cache = VectorCache(10 * 1024 * 1024)
    got = cache.nearest(collection, "a", ["a0000", "nope"], np.ones(8, dtype=np.float32), 5)
    assert list(got) == ["a0000"]


def test_tenants_leave_least_recently_used_first_and_too_large_goes_to_the_store(
    collection,
) -> None:
    one_tenant = 300 * 8 * 4
    cache = VectorCache(one_tenant + 100)
    a = [f"a{i:04d}" for i in range(300)]
    b = [f"b{i:04d}" for i in range(300)]
    probe = np.ones(8, dtype=np.float32)
    cache.nearest(collection, "a", a, probe, 3)
    cache.nearest(collection, "b", b, probe, 3)  # a is evicted to fit b
    cache.nearest(collection, "a", a, probe, 3)  # so a is read again
    assert cache.fetched == 900
    assert VectorCache(one_tenant - 1).nearest(collection, "a", a, probe, 3) is None
    assert VectorCache(0).nearest(collection, "a", a[:1], probe, 3) is None
