"""The store opened and the recorded ids looked up on a thread: the answers are the
store's, only the other ids are asked later, and failures surface where they would have."""

import threading
from pathlib import Path

import numpy as np
import pytest

from neo_assets.store.chroma_store import ChromaStore, open_store
from neo_assets.sweep.early_presence import EarlyPresence


class _Counting:
    """A real store whose lookups are recorded (which ids, on which thread)."""

    def __init__(self, store: ChromaStore, fail_first: int = 0) -> None:
        self.store = store
        self.asked: list[tuple[str, set[str]]] = []
        self.fail_first = fail_first

    def present_ids(self, ids) -> set[str]:  # noqa: ANN001
        wanted = set(ids)
        self.asked.append((threading.current_thread().name, wanted))
        if self.fail_first:
            self.fail_first -= 1
            raise ConnectionError("chroma went away for a moment")
        return self.store.present_ids(wanted)


@pytest.fixture
def store(tmp_path: Path) -> ChromaStore:
    s = open_store(persist_dir=tmp_path / "chroma", url=None, collection_name="neo-test-kb")
    ids = [f"{i:064x}" for i in range(6)]
    s.add(ids, np.eye(6, 8, dtype=np.float32), [f"d{i}" for i in range(6)], [{"t": 1}] * 6)
    return s


IDS = [f"{i:064x}" for i in range(10)]  # 0..5 stored, 6..9 not


def test_recorded_ids_are_looked_up_early_and_the_rest_asked_later(store: ChromaStore) -> None:
    counting = _Counting(store)
    early = EarlyPresence(lambda: counting, IDS[3:8])  # recorded: 3..7
    assert early.store() is counting
    assert counting.asked == [("neo-early-presence", set(IDS[3:8]))]

    assert early.present_ids(IDS) == set(IDS[:6])  # what the store itself says
    assert counting.asked[1] == (threading.current_thread().name, set(IDS[:3] + IDS[8:]))
    assert early.present_ids(IDS[3:8]) == set(IDS[3:6])
    assert counting.asked[2][1] == set()  # nothing left to ask about
    early.close()


def test_no_recorded_ids_only_opens_the_store(store: ChromaStore) -> None:
    counting = _Counting(store)
    early = EarlyPresence(lambda: counting, [])
    early.close()
    assert counting.asked == []
    assert early.present_ids(IDS[4:7]) == set(IDS[4:6])


def test_an_early_lookup_that_failed_is_asked_again(store: ChromaStore) -> None:
    counting = _Counting(store, fail_first=1)
    early = EarlyPresence(lambda: counting, IDS)
    assert early.present_ids(IDS) == set(IDS[:6])
    assert [set_ for _, set_ in counting.asked] == [set(IDS), set(IDS)]


def test_a_store_that_cannot_open_raises_where_the_store_is_asked_for() -> None:
    def refuse() -> ChromaStore:
        raise ConnectionError("chroma at http://127.0.0.1:9 refused the connection")

    early = EarlyPresence(refuse, IDS)
    early.close()  # the thread ended; nothing raised yet
    with pytest.raises(ConnectionError, match="refused"):
        early.store()
    with pytest.raises(ConnectionError, match="refused"):
        early.present_ids(IDS)
