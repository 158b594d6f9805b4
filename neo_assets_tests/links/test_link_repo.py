"""``links_service.link_repo`` against a real Chroma and ledger, with rows written by hand so
each input rule is seen on its own (no Dagster run)."""

import random
from pathlib import Path

import numpy as np
import pytest

from neo_assets.links import link_repo as links_service
from neo_assets.links import rows as links_rows
from neo_assets.links.link_repo import compute_lists, link_repo
from neo_assets.links.params import LinkParams
from neo_assets.links.rows import RepoRows, read_rows, row_times
from neo_assets.links.rules.passes import Links, semantic_links, temporal_links
from neo_assets.links.rules.records import (
    LINK_KINDS,
    LINK_SEMANTIC,
    LINK_TEMPORAL,
    generation_groups,
)
from neo_assets.links.snapshot import LINKS_CACHE_DIR, default_cache_dir, snapshot_path
from neo_assets.links.store import link_set, replace_links, repo_links
from neo_assets.sources.rules.chunks import DeclaredChunk
from neo_assets.store.chroma_store import ChromaStore, open_store
from neo_assets.store.ledger import Ledger

PARAMS = LinkParams(window_seconds=86_400.0, per_chunk=20, threshold=0.7, top_k=20)
T = 1_700_000_000.0


@pytest.fixture
def parts(tmp_path: Path):
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    store = open_store(persist_dir=tmp_path / "chroma", url=None, collection_name="links-test")
    yield ledger, store
    ledger.dispose()


def _declare(ledger: Ledger, chunks: list[tuple[str, str, str]], times: dict[str, float | None]):
    ledger.record_envelope(
        "acme",
        "w",
        revision="r1",
        kind="git",
        entries=[{"path": p, "yielded": True, "changed_at": at} for p, at in times.items()],
        now=T,
    )
    ledger.record_generation(
        "acme",
        "w",
        revision="r1",
        parser_id="neo-code",
        parser_version="1.0.0",
        declaration_digest="d",
        chunks=[DeclaredChunk(cid, path, kind, cid) for cid, kind, path in chunks],
        now=T,
    )


def _add(store: ChromaStore, rows: list[tuple[str, list[float], dict]]) -> None:
    store.add(
        [r[0] for r in rows],
        np.asarray([r[1] for r in rows], dtype=np.float32),
        [f"doc {r[0]}" for r in rows],
        [{"tenantId": "acme", "repoSlug": "w", "embeddingGeneration": "g1", **r[2]} for r in rows],
    )


def _pairs(ledger: Ledger, kind: str) -> set[tuple[str, str]]:
    return {
        (r.chunk_id, r.neighbour_id) for r in repo_links(ledger, "acme", "w") if r.link_kind == kind
    }


def test_semantic_links_stay_within_one_embedding_generation(parts) -> None:
    ledger, store = parts
    _declare(ledger, [(c, "function", "x.py") for c in "abc"], {"x.py": None})
    _add(
        store,
        [
            ("a", [1.0, 0.0, 0.0], {}),
            ("b", [1.0, 0.0, 0.0], {}),
            ("c", [1.0, 0.0, 0.0], {"embeddingGeneration": "g2"}),  # same vector, other space
        ],
    )
    report = link_repo(ledger, store, "acme", "w", PARAMS, now=T)
    assert report.stored and report.generations == 2 and report.rows == 3
    assert _pairs(ledger, LINK_SEMANTIC) == {("a", "b"), ("b", "a")}
    assert report.undated_rows == 3 and _pairs(ledger, LINK_TEMPORAL) == set()


def test_only_present_rows_stamped_for_this_tenant_and_repo_take_part(parts) -> None:
    ledger, store = parts
    chunks = [(c, "function", f"{c}.py") for c in "abcde"]
    _declare(ledger, chunks, {f"{c}.py": T for c in "abcde"})
    v = [0.0, 1.0, 0.0]
    _add(
        store,
        [
            ("a", v, {}),
            ("b", v, {}),
            ("c", v, {"tenantId": "globex"}),  # a row under this id stamped for another tenant
            ("d", v, {"repoSlug": "other"}),
            # "e" is declared but not in the collection (fenced or not yet embedded)
        ],
    )
    report = link_repo(ledger, store, "acme", "w", PARAMS, now=T)
    assert report.declared_chunks == 5 and report.rows == 2
    assert _pairs(ledger, LINK_SEMANTIC) == {("a", "b"), ("b", "a")}
    assert _pairs(ledger, LINK_TEMPORAL) == {("a", "b"), ("b", "a")}
    assert report.linked_chunks == 2 and report.max_links_per_chunk == 2
    assert report.per_kind[LINK_TEMPORAL].links == 2
    assert link_set(ledger, "acme", "w")["chunks"] == 2


def test_rows_are_gathered_by_generation_and_only_the_uncovered_read_with_metadata(
    parts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first run learns the generations from a sample's metadata, lists each one's ids
    by a where filter and reads those rows' vectors alone; the rows no generation covers
    (absent, another tenant's or repo's stamps, no generation stamp) are read row by row
    with their metadata. The result is ``read_rows``'s, sorted by id."""
    ledger, store = parts
    rng = np.random.default_rng(7)
    n = 300  # more than the sample: most g2 rows are found by the filter, not the sample
    ids = [f"c{i:04d}" for i in range(n)]
    _declare(ledger, [(c, "function", f"{c}.py") for c in ids], {})
    vectors = rng.normal(size=(n, 6)).astype(np.float32)
    stamps: list[dict] = []
    for i in range(n):
        stamps.append(
            {"embeddingGeneration": "g2"}
            if i % 3 == 0
            else {"tenantId": "globex"}
            if i == 4
            else {"repoSlug": "other"}
            if i == 5
            else {"embeddingGeneration": 7}  # not a generation a filter can name
            if i == 7
            else {}
        )
    absent = {ids[10], ids[11]}
    _add(store, [(c, vectors[i].tolist(), stamps[i]) for i, c in enumerate(ids) if c not in absent])
    declared = [(c, "function", f"{c}.py") for c in ids]
    reads: list[int] = []
    real_get = type(store.collection).get

    def counting_get(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        if "metadatas" in (kwargs.get("include") or ()):
            reads.append(len(kwargs.get("ids") or ()))
        return real_get(self, *args, **kwargs)

    monkeypatch.setattr(type(store.collection), "get", counting_get)
    rows, vectors_read = links_rows.gather_rows(
        store, declared, tenant_id="acme", repo_slug="w", snapshot=None
    )
    monkeypatch.undo()
    reference = read_rows(store, declared, tenant_id="acme", repo_slug="w")
    order = sorted(range(len(reference.ids)), key=reference.ids.__getitem__)
    assert rows.ids == [reference.ids[i] for i in order]
    assert rows.generations == [reference.generations[i] for i in order]
    assert rows.kinds == [reference.kinds[i] for i in order]
    assert np.array_equal(rows.vectors, reference.vectors[order])
    assert len(rows.ids) == n - 4 and vectors_read == n - 4
    assert set(rows.generations) == {"g1", "g2", None}
    # The metadata read: one sample for g1, one for g2 (learned there too, or not: then
    # its rows are among the rest), then the uncovered rows: far fewer than every row.
    assert sum(reads) <= 2 * links_rows._GENERATION_SAMPLE + 6
    assert sum(reads) < n


def test_invalid_vectors_never_link_and_undated_files_never_link_in_time(parts) -> None:
    ledger, store = parts
    chunks = [("a", "function", "a.py"), ("b", "function", "b.py"), ("z", "function", "z.py")]
    _declare(ledger, chunks, {"a.py": T, "b.py": T + 3600, "z.py": None})
    _add(
        store, [("a", [0.0, 0.0, 1.0], {}), ("b", [0.0, 0.0, 0.0], {}), ("z", [0.0, 0.0, 1.0], {})]
    )
    report = link_repo(ledger, store, "acme", "w", PARAMS, now=T)
    assert _pairs(ledger, LINK_SEMANTIC) == {("a", "z"), ("z", "a")}  # b is all zero
    assert _pairs(ledger, LINK_TEMPORAL) == {("a", "b"), ("b", "a")}  # z has no time
    assert report.undated_rows == 1


def test_nothing_is_stored_without_a_declared_generation(parts) -> None:
    ledger, store = parts
    report = link_repo(ledger, store, "acme", "w", PARAMS, now=T)
    assert not report.stored and report.reason == "no declared generation"
    assert link_set(ledger, "acme", "w") is None


def test_params_follow_settings_and_widen_the_candidate_window_for_a_larger_cap(
    neo_home: Path,
) -> None:
    from neo_assets.config.settings import load_settings

    params = LinkParams.from_settings(
        load_settings(links_temporal_window_s=3600.0, links_temporal_per_chunk=50, links_top_k=7)
    )
    assert (params.window_seconds, params.per_chunk, params.top_k) == (3600.0, 50, 7)
    assert params.candidate_window == 50
    assert LinkParams.from_settings(load_settings()).candidate_window == 20


# --- incremental runs: exactly the links of a full recompute -----------------------------
#
# Vectors have 16 entries of 0, +-1 or +-2 whose squares sum to 16: every float32 product
# of two normalised rows is exact whatever order BLAS sums it in, so the full pass is a
# function of the rows alone and "equal to a full recompute" is checked bit for bit (see
# neo_assets_tests/links/rules/test_incremental.py).

SMALL = LinkParams(window_seconds=3600.0, per_chunk=2, threshold=0.7, top_k=3)


def _exact(rng: random.Random, centre: list[int]) -> list[float]:
    if rng.random() < 0.85:
        out = list(centre)
        for place in rng.sample(range(16), rng.choice([0, 1, 1, 2, 3])):
            out[place] = -out[place]
        return [float(x) for x in out]
    twos = rng.randint(0, 4)
    values = [2] * twos + [1] * (16 - 4 * twos) + [0] * (3 * twos)
    rng.shuffle(values)
    return [float(v * rng.choice((-1, 1))) for v in values]


class World:
    """A repo's declared generation, its files' change times and its rows in Chroma, moved
    one commit at a time."""

    def __init__(self, ledger: Ledger, store: ChromaStore, seed: int) -> None:
        self.ledger, self.store = ledger, store
        self.rng = random.Random(seed)
        self.centres = [[self.rng.choice((-1, 1)) for _ in range(16)] for _ in range(3)]
        self.chunks: dict[str, tuple[str, str]] = {}  # id -> (kind, path)
        self.times: dict[str, float | None] = {}
        self.revision = 0
        self.counter = 0

    def add(self, count: int, *, generation: str = "g1") -> list[str]:
        new = []
        for _ in range(count):
            self.counter += 1
            cid = f"c{self.counter:05d}"
            path = f"f{self.rng.randrange(12):02d}.py"
            self.times.setdefault(path, T - self.rng.choice([0.0, 60.0, 600.0, 5000.0]))
            self.chunks[cid] = (self.rng.choice(["function", "class"]), path)
            new.append(cid)
        vectors = [_exact(self.rng, self.rng.choice(self.centres)) for _ in new]
        if new:
            _add(
                self.store,
                [
                    (c, v, {"embeddingGeneration": generation})
                    for c, v in zip(new, vectors, strict=True)
                ],
            )
        return new

    def remove(self, count: int) -> list[str]:
        gone = self.rng.sample(sorted(self.chunks), min(count, len(self.chunks)))
        for cid in gone:
            del self.chunks[cid]
        return gone

    def retime(self, count: int) -> None:
        for path in self.rng.sample(sorted(self.times), min(count, len(self.times))):
            self.times[path] = self.rng.choice([T + 30.0 * self.revision, None, T - 7200.0])

    def commit(self) -> None:
        self.revision += 1
        at = T + self.revision
        self.ledger.record_envelope(
            "acme",
            "w",
            revision=f"r{self.revision}",
            kind="git",
            entries=[{"path": p, "yielded": True, "changed_at": t} for p, t in self.times.items()],
            now=at,
        )
        self.ledger.record_generation(
            "acme",
            "w",
            revision=f"r{self.revision}",
            parser_id="neo-code",
            parser_version="1.0.0",
            declaration_digest="d",
            chunks=[DeclaredChunk(c, p, k, c) for c, (k, p) in self.chunks.items()],
            now=at,
        )

    def reference(self, params: LinkParams) -> dict[tuple[str, str], list[tuple[str, float]]]:
        """A full recompute over the same rows by the passes' dict form (read_rows, then
        each pass as ``links.rules`` states it), beside the arrays the service uses."""
        declared = [(c, k, p) for c, (k, p) in self.chunks.items()]
        rows = read_rows(self.store, declared, tenant_id="acme", repo_slug="w")
        by_kind = dict_passes(rows, row_times(rows, self.times), params)
        return {(k, c): kept for k, links in by_kind.items() for c, kept in links.items() if kept}


def dict_passes(rows: RepoRows, times: list[float], params: LinkParams) -> dict[str, Links]:
    """Both passes as ``links.rules`` gives them keyed by chunk id: the reference for
    ``compute_lists``."""
    temporal = temporal_links(
        list(zip(rows.ids, rows.kinds, times, strict=True)),
        window_seconds=params.window_seconds,
        per_chunk=params.per_chunk,
        candidate_window=params.candidate_window,
    )
    semantic: Links = {}
    for positions in generation_groups(zip(rows.ids, rows.generations, strict=True)).values():
        semantic.update(
            semantic_links(
                [rows.ids[p] for p in positions],
                rows.vectors[positions],
                threshold=params.threshold,
                top_k=params.top_k,
                block_rows=params.block_rows,
            )
        )
    return {LINK_TEMPORAL: temporal, LINK_SEMANTIC: semantic}


@pytest.mark.parametrize("seed", range(6))
def test_the_lists_of_a_full_run_equal_both_passes_as_core_links_states_them(seed: int) -> None:
    """``compute_lists`` builds the lists from the passes' arrays: the same lists as the
    dict form, over several generations, tied and missing times, invalid vectors."""
    rng = random.Random(seed)
    n = rng.randint(0, 160)
    ids = sorted({f"c{rng.randrange(10**6):07d}" for _ in range(n)})
    n = len(ids)
    centres = np.random.default_rng(seed).normal(size=(4, 8)).astype(np.float32)
    vectors = (
        np.stack(
            [
                centres[rng.randrange(4)] + np.float32(0.2) * np.float32(rng.random())
                for _ in range(n)
            ]
        ).reshape(n, 8)
        if n
        else np.zeros((0, 8), dtype=np.float32)
    )
    for i in range(n):
        if rng.random() < 0.05:
            vectors[i] = 0.0  # invalid: never links
    rows = RepoRows(
        ids=ids,
        kinds=[rng.choice(["function", "class"]) for _ in range(n)],
        paths=[f"f{i % 7}.py" for i in range(n)],
        generations=[rng.choice(["g1", "g2", None]) for _ in range(n)],
        vectors=vectors,
    )
    times = [
        float("nan") if rng.random() < 0.1 else T + rng.choice([0.0, 60.0, 3_600.0, 90_000.0])
        for _ in range(n)
    ]
    params = LinkParams(window_seconds=86_400.0, per_chunk=3, threshold=0.5, top_k=4)
    lists = compute_lists(rows, times, params)
    expected = dict_passes(rows, times, params)
    assert set(lists) == set(LINK_KINDS)
    for kind in LINK_KINDS:
        assert lists[kind].rows == n
        assert lists[kind].to_links(ids) == expected[kind]
    assert any(lists[k].lengths().sum() for k in LINK_KINDS) or n < 2


def test_rows_with_a_repeated_id_are_refused_not_linked_wrongly() -> None:
    rows = RepoRows(
        ids=["a", "a"],
        kinds=["function", "function"],
        paths=["f.py", "f.py"],
        generations=["g", "g"],
        vectors=np.ones((2, 4), dtype=np.float32),
    )
    with pytest.raises(ValueError, match="repeat"):
        compute_lists(rows, [T, T], PARAMS)


def _stored(ledger: Ledger) -> dict[tuple[str, str], list[tuple[str, float]]]:
    out: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for r in repo_links(ledger, "acme", "w"):
        out.setdefault((r.link_kind, r.chunk_id), []).append((r.neighbour_id, r.weight))
    return out


def _run(world: World, params: LinkParams = SMALL, **kw):
    report = link_repo(world.ledger, world.store, "acme", "w", params, now=T + world.revision, **kw)
    assert report.stored
    assert _stored(world.ledger) == world.reference(params)
    head = link_set(world.ledger, "acme", "w")
    assert head["chunks"] == report.rows
    assert head["semantic_links"] == report.per_kind[LINK_SEMANTIC].links
    assert head["temporal_links"] == report.per_kind[LINK_TEMPORAL].links
    return report


@pytest.mark.parametrize("seed", range(4))
def test_incremental_runs_store_exactly_what_a_full_recompute_stores(parts, seed: int) -> None:
    ledger, store = parts
    world = World(ledger, store, seed)
    world.add(150)
    world.commit()
    first = _run(world)
    assert first.mode == "full" and first.full_reason == "no previous link set"
    assert first.vectors_read == 150
    for _ in range(6):
        world.remove(world.rng.randint(0, 6))
        added = world.add(world.rng.randint(0, 6))
        world.retime(world.rng.randint(0, 2))
        world.commit()
        report = _run(world)
        assert report.mode == "incremental", report.full_reason
        assert report.vectors_read == len(added)  # the rest came from the snapshot
        assert report.rows_written < 2 * report.rows


def test_a_one_chunk_change_recomputes_and_writes_little(parts) -> None:
    ledger, store = parts
    world = World(ledger, store, 11)
    world.add(400)
    world.commit()
    _run(world)
    world.add(1)
    world.commit()
    report = _run(world)
    assert report.mode == "incremental" and report.vectors_read == 1
    assert report.recomputed_chunks < 100 and report.rows_written < 100


def test_the_snapshot_is_only_a_cache_any_doubt_recomputes_in_full(parts, tmp_path: Path) -> None:
    ledger, store = parts
    world = World(ledger, store, 5)
    world.add(80)
    world.commit()
    _run(world)
    path = snapshot_path(tmp_path / LINKS_CACHE_DIR, "acme", "w")
    assert path.exists() and default_cache_dir(ledger) == tmp_path / LINKS_CACHE_DIR

    # Torn: a full recompute that reads every vector, then a fresh snapshot.
    path.write_bytes(path.read_bytes()[:1000])
    world.add(2)
    world.commit()
    report = _run(world)
    assert (report.mode, report.full_reason, report.vectors_read) == (
        "full",
        "no usable snapshot",
        82,
    )

    # Altered: one flipped bit in the stored lists fails its checksum.
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x10
    path.write_bytes(bytes(data))
    world.add(1)
    world.commit()
    assert _run(world).full_reason == "no usable snapshot"

    # Of another link set: links stored by a run that kept its snapshot elsewhere.
    # (as many rows as before, so only the link set's identity tells the sets apart)
    old = path.read_bytes()
    world.remove(1)
    world.add(1)
    world.commit()
    assert _run(world, cache_dir=tmp_path / "elsewhere").mode == "full"
    path.write_bytes(old)
    world.remove(1)
    world.add(1)
    world.commit()
    report = _run(world)
    assert report.full_reason == "the snapshot is of another link set"
    assert report.vectors_read == 2  # its vectors still serve

    # Other parameters.
    world.add(1)
    world.commit()
    wider = LinkParams(window_seconds=7200.0, per_chunk=2, threshold=0.7, top_k=4)
    assert _run(world, wider).full_reason == "parameters changed"
    world.add(1)
    world.commit()
    assert _run(world, wider).mode == "incremental"


def test_a_reembedded_row_is_read_again_and_a_new_generation_recomputes_in_full(parts) -> None:
    ledger, store = parts
    world = World(ledger, store, 8)
    world.add(60)
    world.commit()
    _run(world)
    # Two rows re-embedded under g2 (same ids, other vectors): the set of generations
    # changes, so the run is full; the two vectors come from Chroma, not the snapshot.
    moved = sorted(world.chunks)[:2]
    store.delete_ids(moved)
    _add(
        store,
        [(c, _exact(world.rng, world.centres[0]), {"embeddingGeneration": "g2"}) for c in moved],
    )
    world.commit()
    report = _run(world)
    assert report.full_reason == "embedding generations changed" and report.vectors_read == 2
    assert report.generations == 2
    # One more row moves from g1 to g2: same generations, the row leaves one group and
    # joins the other incrementally.
    third = sorted(world.chunks)[2]
    store.delete_ids([third])
    _add(store, [(third, _exact(world.rng, world.centres[0]), {"embeddingGeneration": "g2"})])
    world.commit()
    report = _run(world)
    assert report.mode == "incremental" and report.vectors_read == 1


def test_a_cached_row_restamped_for_another_tenant_takes_no_part(parts) -> None:
    ledger, store = parts
    world = World(ledger, store, 9)
    world.add(40)
    world.commit()
    _run(world)
    victim = sorted(world.chunks)[3]
    store.update_metadata(
        [victim], [{"tenantId": "globex", "repoSlug": "w", "embeddingGeneration": "g1"}]
    )
    world.add(1)
    world.commit()
    report = _run(world)  # the reference (read_rows) drops it too
    assert report.rows == 40
    assert all(
        victim != c and victim not in {n for n, _ in kept}
        for (_, c), kept in _stored(ledger).items()
    )


def test_a_large_change_recomputes_in_full(parts) -> None:
    ledger, store = parts
    world = World(ledger, store, 10)
    world.add(40)
    world.commit()
    _run(world)
    world.remove(10)
    world.add(10)
    world.commit()
    assert _run(world).full_reason == "large change"


def test_links_stored_by_another_run_meanwhile_are_replaced_whole(parts, monkeypatch) -> None:
    ledger, store = parts
    world = World(ledger, store, 12)
    world.add(50)
    world.commit()
    _run(world)
    world.add(2)
    world.commit()
    real_update = links_service.update_links

    def another_run_first(ledger, tenant_id, repo_slug, changed, **kw):
        # Another run stores its (wrong, here) links between this run's read and write.
        replace_links(
            ledger,
            tenant_id,
            repo_slug,
            {LINK_TEMPORAL: {"x": [("y", 0.5)]}},
            revision=kw["revision"],
            generation_recorded_at=kw["generation_recorded_at"],
            chunks=1,
            params={},
            now=kw["now"] - 0.5,
        )
        return real_update(ledger, tenant_id, repo_slug, changed, **kw)

    monkeypatch.setattr(links_service, "update_links", another_run_first)
    report = _run(world)  # the lists were still the full result: stored whole
    assert report.mode == "full" and report.full_reason == "the link set moved during the run"
    monkeypatch.undo()
    world.add(1)
    world.commit()
    assert _run(world).mode == "incremental"
