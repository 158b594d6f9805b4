"""The store opened and the repo's rows listed on a thread: every answer is the store's,
Chroma is asked again only about listed ids outside the recorded generation, and failures
surface where the store is asked for."""

import threading
from pathlib import Path

import numpy as np
import pytest

from neo_assets.concurrency.early_presence import EarlyPresence
from neo_assets.core.ids.stamps import tenant_filter
from neo_assets.store.chroma_store import ChromaStore, open_store

WHERE = tenant_filter("acme", "w")
IDS = [f"{i:064x}" for i in range(10)]  # 0..5 are acme/w rows, 6..9 are not rows
OTHER = f"{99:064x}"  # a row of another repo


class _Recording:
    """A real store whose calls are recorded (what was asked, on which thread)."""

    def __init__(self, store: ChromaStore, fail: str = "") -> None:
        self.store = store
        self.calls: list[tuple[str, str, object]] = []
        self.fail = fail

    def present_ids(self, ids) -> set[str]:  # noqa: ANN001
        wanted = set(ids)
        self.calls.append((threading.current_thread().name, "present_ids", wanted))
        return self.store.present_ids(wanted)

    def ids_where(self, where) -> set[str]:  # noqa: ANN001
        self.calls.append((threading.current_thread().name, "ids_where", where))
        if self.fail == "ids_where":
            raise ConnectionError("chroma went away for a moment")
        return self.store.ids_where(where)


@pytest.fixture
def store(tmp_path: Path) -> ChromaStore:
    s = open_store(persist_dir=tmp_path / "chroma", url=None, collection_name="neo-test-kb")
    ids = IDS[:6] + [OTHER]
    metas = [{"tenantId": "acme", "repoSlug": "w"}] * 6 + [{"tenantId": "acme", "repoSlug": "x"}]
    s.add(ids, np.eye(7, 8, dtype=np.float32), [f"d{i}" for i in range(7)], metas)
    return s


def test_answers_are_the_stores_and_only_listed_unrecorded_ids_are_asked_again(
    store: ChromaStore,
) -> None:
    rec = _Recording(store)
    early = EarlyPresence(lambda: rec, WHERE, IDS[:3] + IDS[7:8])  # recorded: 0, 1, 2, 7
    assert early.store() is rec
    assert rec.calls == [("neo-early-presence", "ids_where", WHERE)]

    assert early.present_ids(IDS + [OTHER]) == set(IDS[:6])
    # 3..5 are rows outside the recorded generation: a reconciliation may delete such
    # a row, so they are asked about again (on the caller's thread, after the listing).
    assert rec.calls[1:] == [(threading.current_thread().name, "present_ids", set(IDS[3:6]))]

    store.delete_ids([IDS[4]])  # deleted since the listing (a reclaim of a stale row)
    assert early.present_ids(IDS[3:6]) == {IDS[3], IDS[5]}
    assert early.present_ids(IDS[:3] + IDS[6:]) == set(IDS[:3])  # no question asked
    assert len(rec.calls) == 3
    early.close()


def test_a_repo_with_no_rows_answers_every_id_absent_without_asking(store: ChromaStore) -> None:
    rec = _Recording(store)
    early = EarlyPresence(lambda: rec, tenant_filter("acme", "new"), [])
    assert early.present_ids(IDS) == set()
    assert [name for _, name, _ in rec.calls] == ["ids_where"]


def test_a_listing_that_failed_asks_about_every_id(store: ChromaStore) -> None:
    rec = _Recording(store, fail="ids_where")
    early = EarlyPresence(lambda: rec, WHERE, IDS[:3])
    assert early.present_ids(IDS) == set(IDS[:6])
    assert rec.calls[-1][1:] == ("present_ids", set(IDS))


def test_a_store_that_cannot_open_raises_where_the_store_is_asked_for() -> None:
    def refuse() -> ChromaStore:
        raise ConnectionError("chroma at http://127.0.0.1:9 refused the connection")

    early = EarlyPresence(refuse, WHERE, IDS)
    early.close()  # the thread ended; nothing raised yet
    with pytest.raises(ConnectionError, match="refused"):
        early.store()
    with pytest.raises(ConnectionError, match="refused"):
        early.present_ids(IDS)
