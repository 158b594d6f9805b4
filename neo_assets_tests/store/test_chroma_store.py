"""The Chroma adapter against a real PersistentClient."""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from neo_assets.concurrency.chroma_writes import chroma_writes
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


def _chroma_threads() -> dict[int, set[int]]:
    """This process's embedded-Chroma threads and the cores each may run on."""
    import os

    from neo_assets.concurrency.chroma_core import is_chroma_thread
    from neo_assets.concurrency.chroma_threads import TASKS

    out = {}
    for task in TASKS.iterdir():
        try:
            if is_chroma_thread((task / "comm").read_text()):
                out[int(task.name)] = os.sched_getaffinity(int(task.name))
        except OSError:
            continue
    return out


def test_one_core_puts_every_chroma_thread_on_the_picked_core(tmp_path: Path) -> None:
    import os

    from neo_assets.concurrency.chroma_threads import TASKS

    if not TASKS.is_dir() or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs Linux and two allowed cores")
    store = open_store(
        persist_dir=tmp_path / "chroma",
        url=None,
        collection_name="neo-test-kb",
        hooks=chroma_writes(one_core=True, gil_gap=False, remote=False),
    )
    assert store.hooks.pin_core in os.sched_getaffinity(0)
    # A second client starts threads of its own after the pin: the next write moves them.
    other = open_store(persist_dir=tmp_path / "other", url=None, collection_name="neo-test-kb")
    ids = [f"{i:064x}" for i in range(20)]
    store.add(ids, _vec(20), [f"doc {i}" for i in range(20)], [{"tenantId": "a"}] * 20)
    threads = _chroma_threads()
    assert threads, "embedded Chroma runs its writes on threads of its own"
    assert all(cores == {store.hooks.pin_core} for cores in threads.values())
    # The rows are written and read as without the pin; this process's own thread is free.
    assert store.present_ids(ids) == set(ids)
    assert other.count() == 0
    assert len(os.sched_getaffinity(0)) >= 2


def test_one_core_keeps_helper_processes_off_chromas_core_while_it_adds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """During an add, helpers run off Chroma's core; before and after, anywhere."""
    import os

    from neo_assets.concurrency.chroma_threads import TASKS
    from neo_assets.concurrency.helper_process import HelperProcess

    if not TASKS.is_dir() or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs Linux and two allowed cores")
    anywhere = os.sched_getaffinity(0)
    with HelperProcess("neo_assets_tests.fakes.echo_helper") as helper:
        assert helper.call(("echo", 1), wait_ready_s=30, answer_within_s=30) == 1
        store = open_store(
            persist_dir=tmp_path / "chroma",
            url=None,
            collection_name="neo-test-kb",
            hooks=chroma_writes(one_core=True, gil_gap=False, remote=False),
        )
        assert os.sched_getaffinity(helper.pid) == anywhere
        during: list[set[int]] = []
        original = type(store.collection).add

        def watching_add(collection, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            during.append(os.sched_getaffinity(helper.pid))
            return original(collection, *args, **kwargs)

        monkeypatch.setattr(type(store.collection), "add", watching_add)
        store.add(["a" * 64], _vec(1), ["x"], [{"tenantId": "a"}])
        assert during == [anywhere - {store.hooks.pin_core}]
        assert os.sched_getaffinity(helper.pid) == anywhere


def test_without_one_core_the_store_pins_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store.hooks is None
    store.add(["a" * 64], _vec(1), ["x"], [{"tenantId": "a"}])
    assert store.count() == 1


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
