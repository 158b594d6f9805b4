"""A repo's links in a real (SQLite) ledger: replaced whole or updated list by list, guarded
by the declared generation (and an update by the link set it was diffed with), read back
scoped by tenant."""

from pathlib import Path

import pytest
import sqlalchemy as sa

from neo_assets.links.rules.lists import LinkLists
from neo_assets.links.rules.records import LINK_SEMANTIC, LINK_TEMPORAL, LinkRecord, Neighbour
from neo_assets.links.store import (
    _INSERT_BATCH,
    LinkSetMoved,
    link_set,
    neighbours,
    replace_links,
    repo_links,
    update_links,
)
from neo_assets.store.ledger import Ledger


@pytest.fixture
def ledger(tmp_path: Path):
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    yield ledger
    ledger.dispose()


def _declare(ledger: Ledger, tenant: str, repo: str, now: float) -> float:
    ledger.record_generation(
        tenant,
        repo,
        revision=f"rev-{now}",
        parser_id="neo-code",
        parser_version="1.0.0",
        declaration_digest="d",
        chunks=[],
        now=now,
    )
    return now


def _store(ledger: Ledger, tenant: str, repo: str, links: dict, at: float) -> bool:
    return replace_links(
        ledger,
        tenant,
        repo,
        links,
        revision=f"rev-{at}",
        generation_recorded_at=at,
        chunks=3,
        params={"windowSeconds": 86400.0, "topK": 20},
        now=at + 1,
    )


def test_the_migration_creates_the_link_tables(ledger: Ledger) -> None:
    names = set(sa.inspect(ledger.engine).get_table_names())
    assert {"chunk_links", "chunk_link_sets"} <= names
    indexes = {i["name"] for i in sa.inspect(ledger.engine).get_indexes("chunk_links")}
    assert "ix_chunk_links_chunk" in indexes


def test_links_are_replaced_whole_per_repo_never_accumulated(ledger: Ledger) -> None:
    g1 = _declare(ledger, "acme", "w", 100.0)
    _declare(ledger, "acme", "other", 100.0)
    first = {LINK_TEMPORAL: {"a": [("b", 0.9)], "b": [("a", 0.9)], "c": []}}
    assert _store(ledger, "acme", "w", first, g1)
    assert _store(ledger, "acme", "other", {LINK_SEMANTIC: {"x": [("y", 0.8)]}}, 100.0)
    assert repo_links(ledger, "acme", "w") == [
        LinkRecord("a", LINK_TEMPORAL, "b", 0.9, 0),
        LinkRecord("b", LINK_TEMPORAL, "a", 0.9, 0),
    ]

    g2 = _declare(ledger, "acme", "w", 200.0)
    second = {LINK_SEMANTIC: {"a": [("c", 0.95), ("d", 0.71)]}, LINK_TEMPORAL: {"a": []}}
    assert _store(ledger, "acme", "w", second, g2)
    assert repo_links(ledger, "acme", "w") == [  # the first set is gone
        LinkRecord("a", LINK_SEMANTIC, "c", 0.95, 0),
        LinkRecord("a", LINK_SEMANTIC, "d", 0.71, 1),
    ]
    assert repo_links(ledger, "acme", "other") == [LinkRecord("x", LINK_SEMANTIC, "y", 0.8, 0)]
    head = link_set(ledger, "acme", "w")
    assert head is not None
    assert head["revision"] == "rev-200.0" and head["generation_recorded_at"] == 200.0
    assert (head["temporal_links"], head["semantic_links"], head["chunks"]) == (0, 2, 3)
    assert head["params"] == {"windowSeconds": 86400.0, "topK": 20}

    g3 = _declare(ledger, "acme", "w", 300.0)
    assert _store(ledger, "acme", "w", {}, g3)  # an empty set replaces too
    assert repo_links(ledger, "acme", "w") == []


def test_a_self_link_or_unknown_kind_is_refused_and_nothing_is_written(ledger: Ledger) -> None:
    g = _declare(ledger, "acme", "w", 100.0)
    kept = {LINK_TEMPORAL: {"a": [("b", 1.0)]}}
    assert _store(ledger, "acme", "w", kept, g)
    with pytest.raises(ValueError, match="itself"):
        _store(ledger, "acme", "w", {LINK_SEMANTIC: {"a": [("a", 1.0)]}}, g)
    with pytest.raises(ValueError, match="unknown link kind"):
        _store(ledger, "acme", "w", {"lexical": {"a": [("b", 1.0)]}}, g)
    # The rows are inserted a batch at a time: a self link found after whole batches went
    # in rolls them back with the deletion before them.
    many = {f"c{i:05d}": [(f"c{i + 1:05d}", 0.5)] for i in range(_INSERT_BATCH + 10)}
    many["z"] = [("z", 1.0)]
    with pytest.raises(ValueError, match="itself"):
        _store(ledger, "acme", "w", {LINK_TEMPORAL: many}, g)
    assert repo_links(ledger, "acme", "w") == [LinkRecord("a", LINK_TEMPORAL, "b", 1.0, 0)]
    assert link_set(ledger, "acme", "w")["temporal_links"] == 1


def test_lists_held_as_arrays_are_stored_as_their_links_are(ledger: Ledger) -> None:
    """The full links run hands the store ``LinkLists.as_links`` (built a list at a time):
    stored exactly as the same links keyed by chunk id."""
    ids = [f"c{i:05d}" for i in range(_INSERT_BATCH + 7)]
    links = {
        LINK_TEMPORAL: {
            c: [(ids[(i + 1) % len(ids)], 0.75)] if i % 3 else [] for i, c in enumerate(ids)
        },
        LINK_SEMANTIC: {c: [(ids[i - 1], 0.9), (ids[i - 2], 0.8)] for i, c in enumerate(ids)},
    }
    g = _declare(ledger, "acme", "w", 100.0)
    assert _store(ledger, "acme", "w", links, g)
    from_dicts, set_from_dicts = repo_links(ledger, "acme", "w"), link_set(ledger, "acme", "w")
    views = {
        kind: LinkLists.from_links(by_chunk, ids).as_links(ids) for kind, by_chunk in links.items()
    }
    g2 = _declare(ledger, "acme", "w", 200.0)
    assert _store(ledger, "acme", "w", views, g2)
    assert repo_links(ledger, "acme", "w") == from_dicts
    stored = link_set(ledger, "acme", "w")
    for key in ("chunks", "temporal_links", "semantic_links"):
        assert stored[key] == set_from_dicts[key]
    assert stored["temporal_links"] == sum(1 for i in range(len(ids)) if i % 3)


def test_links_of_a_generation_that_moved_on_are_not_stored(ledger: Ledger) -> None:
    assert not _store(ledger, "acme", "w", {LINK_TEMPORAL: {"a": [("b", 1.0)]}}, 100.0)
    assert link_set(ledger, "acme", "w") is None  # no declared generation at all

    g1 = _declare(ledger, "acme", "w", 100.0)
    assert _store(ledger, "acme", "w", {LINK_TEMPORAL: {"a": [("b", 1.0)]}}, g1)
    _declare(ledger, "acme", "w", 150.0)  # a newer sweep declared while links were computed
    assert not _store(ledger, "acme", "w", {LINK_SEMANTIC: {"a": [("z", 0.9)]}}, g1)
    assert repo_links(ledger, "acme", "w") == [LinkRecord("a", LINK_TEMPORAL, "b", 1.0, 0)]
    assert link_set(ledger, "acme", "w")["generation_recorded_at"] == 100.0


@pytest.mark.parametrize(
    "torn", ["{torn", '{"a": 1}', '[["b"]]', '[["b", "0.5"]]', '[["b", NaN]]', "[[1, 0.5]]"]
)
def test_torn_records_read_as_unobserved(ledger: Ledger, torn: str) -> None:
    g = _declare(ledger, "acme", "w", 100.0)
    links = {LINK_TEMPORAL: {"a": [("b", 0.5)]}, LINK_SEMANTIC: {"a": [("c", 0.9)]}}
    assert _store(ledger, "acme", "w", links, g)
    with ledger.engine.begin() as conn:
        conn.execute(
            sa.text("update chunk_links set neighbours = :v where link_kind = 'temporal'"),
            {"v": torn},
        )
        conn.execute(sa.text("update chunk_link_sets set params = '{torn'"))
    # The torn list offers nothing; the intact one still does.
    assert neighbours(ledger, "acme", ["a"], limit=5) == {"a": [Neighbour("c", LINK_SEMANTIC, 0.9)]}
    assert repo_links(ledger, "acme", "w") == [LinkRecord("a", LINK_SEMANTIC, "c", 0.9, 0)]
    assert link_set(ledger, "acme", "w")["params"] is None


def test_neighbours_merge_kinds_best_first_and_stay_within_the_tenant(ledger: Ledger) -> None:
    g = _declare(ledger, "acme", "w", 100.0)
    _declare(ledger, "globex", "t", 100.0)
    acme = {
        LINK_TEMPORAL: {"a": [("b", 0.75), ("c", 0.5), ("d", 0.3)], "b": [("a", 0.75)]},
        LINK_SEMANTIC: {"a": [("b", 0.9), ("e", 0.8)]},
    }
    assert _store(ledger, "acme", "w", acme, g)
    # Globex holds links under the same chunk id (as a forged or colliding record would).
    assert _store(ledger, "globex", "t", {LINK_SEMANTIC: {"a": [("g", 0.99)]}}, 100.0)

    got = neighbours(ledger, "acme", ["a", "b", "nolinks"], limit=3)
    assert got["a"] == [
        Neighbour("b", LINK_SEMANTIC, 0.9),
        Neighbour("e", LINK_SEMANTIC, 0.8),
        Neighbour("c", LINK_TEMPORAL, 0.5),
    ]
    assert got["b"] == [Neighbour("a", LINK_TEMPORAL, 0.75)]
    assert got["nolinks"] == []
    assert neighbours(ledger, "acme", ["a"], limit=1) == {"a": [Neighbour("b", LINK_SEMANTIC, 0.9)]}
    assert neighbours(ledger, "globex", ["a"], limit=3)["a"] == [
        Neighbour("g", LINK_SEMANTIC, 0.99)
    ]
    assert neighbours(ledger, "acme", ["a"], limit=0) == {"a": []}
    assert neighbours(ledger, "nobody", ["a"], limit=3) == {"a": []}


def test_neighbours_read_many_ids_in_batches(ledger: Ledger) -> None:
    g = _declare(ledger, "acme", "w", 100.0)
    ids = [f"c{i:04d}" for i in range(1201)]
    links = {LINK_TEMPORAL: {a: [(b, 0.5)] for a, b in zip(ids, ids[1:], strict=False)}}
    assert _store(ledger, "acme", "w", links, g)
    got = neighbours(ledger, "acme", ids[:1200], limit=1)
    assert len(got) == 1200
    assert all(
        got[a] == [Neighbour(b, LINK_TEMPORAL, 0.5)]
        for a, b in zip(ids[:1200], ids[1:1201], strict=True)
    )


# --- update_links: only the changed lists, against the very set they were diffed with ----


def _update(ledger: Ledger, changed: dict, at: float, expected: dict, **kw) -> bool:
    args = {
        "revision": f"rev-{at}",
        "generation_recorded_at": at,
        "chunks": 4,
        "counts": {LINK_TEMPORAL: 1, LINK_SEMANTIC: 3},
        "params": {"windowSeconds": 86400.0, "topK": 20},
        "now": at + 2,
        **kw,
    }
    return update_links(ledger, "acme", "w", changed, expected=expected, **args)


def test_an_update_writes_only_the_changed_lists_and_the_set_row(ledger: Ledger) -> None:
    g1 = _declare(ledger, "acme", "w", 100.0)
    _declare(ledger, "acme", "other", 100.0)
    first = {
        LINK_TEMPORAL: {"a": [("b", 0.9)], "b": [("a", 0.9)]},
        LINK_SEMANTIC: {"a": [("c", 0.8)], "c": [("a", 0.8)]},
    }
    assert _store(ledger, "acme", "w", first, g1)
    assert _store(ledger, "acme", "other", {LINK_SEMANTIC: {"a": [("z", 0.7)]}}, 100.0)
    g2 = _declare(ledger, "acme", "w", 200.0)
    changed = {
        LINK_TEMPORAL: {"b": []},  # b keeps no temporal link now: its row goes
        LINK_SEMANTIC: {"c": [("a", 0.8), ("d", 0.75)], "d": [("c", 0.75)]},
    }
    assert _update(ledger, changed, g2, link_set(ledger, "acme", "w"))
    assert repo_links(ledger, "acme", "w") == [
        LinkRecord("a", LINK_SEMANTIC, "c", 0.8, 0),
        LinkRecord("a", LINK_TEMPORAL, "b", 0.9, 0),  # untouched
        LinkRecord("c", LINK_SEMANTIC, "a", 0.8, 0),
        LinkRecord("c", LINK_SEMANTIC, "d", 0.75, 1),
        LinkRecord("d", LINK_SEMANTIC, "c", 0.75, 0),
    ]
    assert repo_links(ledger, "acme", "other") == [LinkRecord("a", LINK_SEMANTIC, "z", 0.7, 0)]
    head = link_set(ledger, "acme", "w")
    assert (head["revision"], head["generation_recorded_at"], head["computed_at"]) == (
        "rev-200.0",
        200.0,
        202.0,
    )
    assert (head["chunks"], head["temporal_links"], head["semantic_links"]) == (4, 1, 3)


def test_an_update_stores_nothing_when_the_generation_or_the_link_set_moved(
    ledger: Ledger,
) -> None:
    g1 = _declare(ledger, "acme", "w", 100.0)
    assert _store(ledger, "acme", "w", {LINK_TEMPORAL: {"a": [("b", 0.9)]}}, g1)
    seen = link_set(ledger, "acme", "w")
    change = {LINK_TEMPORAL: {"a": []}, LINK_SEMANTIC: {"a": [("c", 0.8)]}}
    # The declared generation moved on while the update was computed.
    _declare(ledger, "acme", "w", 150.0)
    assert not _update(ledger, change, g1, seen)
    # Another run stored a link set since `seen` was read: the diff is against rows that
    # are gone, so nothing is written.
    g2 = _declare(ledger, "acme", "w", 200.0)
    assert _store(ledger, "acme", "w", {LINK_TEMPORAL: {"a": [("e", 0.5)]}}, g2)
    with pytest.raises(LinkSetMoved):
        _update(ledger, change, g2, seen)
    assert repo_links(ledger, "acme", "w") == [LinkRecord("a", LINK_TEMPORAL, "e", 0.5, 0)]
    with pytest.raises(ValueError, match="itself"):
        _update(ledger, {LINK_SEMANTIC: {"a": [("a", 1.0)]}}, g2, link_set(ledger, "acme", "w"))
    # No link set at all: nothing to update.
    _declare(ledger, "acme", "fresh", 300.0)
    with pytest.raises(LinkSetMoved):
        update_links(
            ledger,
            "acme",
            "fresh",
            change,
            expected=seen,
            revision="r",
            generation_recorded_at=300.0,
            chunks=1,
            counts={},
            params={},
            now=301.0,
        )
