"""``links_service.link_repo`` against a real Chroma and ledger, with rows written by hand so
each input rule is seen on its own (no Dagster run)."""

from pathlib import Path

import numpy as np
import pytest

from neo_assets.core.link_records import LINK_SEMANTIC, LINK_TEMPORAL
from neo_assets.links_service import LinkParams, link_repo
from neo_assets.store.chroma_store import ChromaStore, open_store
from neo_assets.store.ledger import DeclaredChunk, Ledger
from neo_assets.store.links import link_set, repo_links

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
    from neo_assets.settings import load_settings

    params = LinkParams.from_settings(
        load_settings(links_temporal_window_s=3600.0, links_temporal_per_chunk=50, links_top_k=7)
    )
    assert (params.window_seconds, params.per_chunk, params.top_k) == (3600.0, 50, 7)
    assert params.candidate_window == 50
    assert LinkParams.from_settings(load_settings()).candidate_window == 20
