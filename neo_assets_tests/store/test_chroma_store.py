"""The Chroma adapter against a real PersistentClient."""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from neo_assets.store.chroma_store import open_store


def _store(tmp_path: Path):
    return open_store(persist_dir=tmp_path / "chroma", url=None, collection_name="neo-test-kb")


def _vec(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, 16)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_add_then_present_ids_checks_by_id(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ids = [f"{i:064x}" for i in range(10)]
    metas = [{"tenantId": "a" if i < 5 else "b", "repoSlug": "r"} for i in range(10)]
    store.add(ids, _vec(10), [f"doc {i}" for i in range(10)], metas)
    assert store.present_ids(ids[:3] + ["f" * 64]) == set(ids[:3])
    assert store.count() == 10
    assert {r["id"] for r in store.tenant_rows("a")} == set(ids[:5])


def test_query_is_scoped_by_where_and_never_embeds(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ids = [f"{i:064x}" for i in range(6)]
    vecs = _vec(6, 1)
    metas = [{"tenantId": "a" if i % 2 else "b", "repoSlug": "r"} for i in range(6)]
    store.add(ids, vecs, [f"doc {i}" for i in range(6)], metas)
    hits = store.query(vecs[1], where={"tenantId": {"$eq": "a"}}, k=10)
    assert hits[0]["id"] == ids[1]
    assert {h["metadata"]["tenantId"] for h in hits} == {"a"}
    assert hits[0]["score"] == pytest.approx(1.0, abs=1e-4)
    # Anything that would make Chroma embed fails loudly instead of downloading a model.
    with pytest.raises(Exception, match="never lets Chroma embed"):
        store.collection.add(ids=["e" * 64], documents=["text without embedding"])


def test_collection_is_cosine_and_reopens(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.add(["a" * 64], _vec(1), ["x"], [{"tenantId": "a"}])
    again = _store(tmp_path)
    assert again.count() == 1
    assert again.collection.configuration_json["hnsw"]["space"] == "cosine"


@pytest.mark.parametrize("page", [3, 5, 5000])
def test_count_where_counts_each_matching_row_once_across_pages(tmp_path: Path, page: int) -> None:
    store = _store(tmp_path)
    ids = [f"{i:064x}" for i in range(13)]
    metas = [{"tenantId": "a" if i < 10 else "b", "repoSlug": "r"} for i in range(13)]
    store.add(ids, _vec(13), [f"doc {i}" for i in range(13)], metas)
    assert store.count_where({"tenantId": "a"}, page=page) == 10  # 10 = 2 full pages of 5
    assert store.count_where({"tenantId": "b"}, page=page) == 3
    assert store.count_where({"tenantId": "nobody"}, page=page) == 0
    both = {"$and": [{"tenantId": {"$eq": "a"}}, {"repoSlug": {"$eq": "r"}}]}
    assert store.count_where(both, page=page) == 10


def test_ids_where_lists_every_matching_row_across_pages(tmp_path: Path) -> None:
    store = _store(tmp_path)
    ids = [f"{i:064x}" for i in range(12)]
    metas = [{"tenantId": "a", "repoSlug": "r" if i % 3 else "s"} for i in range(12)]
    store.add(ids, _vec(12), [f"doc {i}" for i in range(12)], metas)
    where = {"$and": [{"tenantId": {"$eq": "a"}}, {"repoSlug": {"$eq": "r"}}]}
    assert store.ids_where(where, page=3) == {ids[i] for i in range(12) if i % 3}
    assert store.count_where(where, page=3) == 8
    assert store.ids_where({"tenantId": {"$eq": "b"}}) == set()


def _immutable_flag_works(probe: Path) -> bool:
    if os.geteuid() != 0 or shutil.which("chattr") is None:
        return False
    probe.write_text("x")
    if subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode != 0:
        return False
    subprocess.run(["chattr", "-i", str(probe)], check=True)
    return True


def test_a_failed_open_does_not_spoil_the_next_open_in_the_process(tmp_path: Path) -> None:
    """Chroma keeps a directory's half-started system when opening fails (a read-only
    directory); once the directory is writable again, a new open must work."""
    if not _immutable_flag_works(tmp_path / "probe"):
        pytest.skip("needs root, chattr and a filesystem with the immutable flag")
    with _store(tmp_path) as store:
        store.add(["a"], _vec(1), ["doc a"], [{"tenantId": "t"}])
    chroma = tmp_path / "chroma"
    subprocess.run(["chattr", "-R", "+i", str(chroma)], check=True)
    try:
        with pytest.raises(Exception, match="readonly"):
            _store(tmp_path)
    finally:
        subprocess.run(["chattr", "-R", "-i", str(chroma)], check=True)
    with _store(tmp_path) as store:
        assert store.present_ids(["a"]) == {"a"}
