"""A links snapshot round-trips whatever the run saw, empty arrays included."""

from pathlib import Path

import numpy as np

from neo_assets.links.rules.lists import LinkLists
from neo_assets.links.rules.records import LINK_KINDS
from neo_assets.links.snapshot import Snapshot, load_snapshot, save_snapshot


def _round_trip(tmp_path: Path, snapshot: Snapshot) -> Snapshot | None:
    path = tmp_path / "acme" / "w.links"
    assert save_snapshot(path, "acme", "w", snapshot)
    return load_snapshot(path, "acme", "w")


def test_a_repo_with_no_rows_saves_and_loads_its_snapshot(tmp_path: Path) -> None:
    # Every file deleted or excluded: the links run sees no rows (found by the soak).
    empty = Snapshot(
        ids=[],
        generations=[],
        vectors=np.zeros((0, 8), dtype=np.float32),
        link_set={"generation": "g", "digest": "d"},
        kinds=[],
        times=np.zeros(0, dtype=np.float64),
        lists={kind: LinkLists.empty(0) for kind in LINK_KINDS},
    )
    got = _round_trip(tmp_path, empty)
    assert got is not None and got.ids == [] and got.vectors.shape == (0, 8)
    assert got.lists is not None
    assert all(len(got.lists[k].neighbours) == 0 for k in LINK_KINDS)


def test_rows_without_any_link_keep_their_vectors_and_empty_lists(tmp_path: Path) -> None:
    vectors = np.arange(24, dtype=np.float32).reshape(3, 8)
    snapshot = Snapshot(
        ids=["a" * 64, "b" * 64, "c" * 64],
        generations=["g", "g", None],
        vectors=vectors,
        link_set={"generation": "g", "digest": "d"},
        kinds=["function", "class", "module"],
        times=np.array([1.0, np.nan, 3.0]),
        lists={kind: LinkLists.empty(3) for kind in LINK_KINDS},
    )
    got = _round_trip(tmp_path, snapshot)
    assert got is not None and got.ids == snapshot.ids
    assert np.array_equal(got.vectors, vectors)
    assert got.link_set == snapshot.link_set and got.lists is not None
    assert all(np.array_equal(got.lists[k].offsets, [0, 0, 0, 0]) for k in LINK_KINDS)
