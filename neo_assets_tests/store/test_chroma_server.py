"""The store on a real Chroma server (`chroma run` from the venv, on 127.0.0.1): sweeps,
queries, a reconcile and a crash-restart of the server in the middle of a sweep."""

import asyncio
import threading
import time
from pathlib import Path

import chromadb
import dagster as dg
import pytest
from chromadb.config import Settings as ChromaSettings

from neo_assets.cli.launch import run_reconciliation, run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.core import codes
from neo_assets.core.ids.stamps import tenant_filter
from neo_assets.generations.serving import configured_generation
from neo_assets.query.one_shot import run_query
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import KbHandles
from neo_assets_tests.servers import ChromaServer, chroma_server_or_skip
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


def make_repo(path: Path, files: dict[str, str]) -> GitRepo:
    repo = GitRepo(path)
    for rel, text in files.items():
        repo.write(rel, text)
    repo.commit("initial", when=1_700_000_000)
    return repo


def many_functions(n_files: int, per_file: int) -> dict[str, str]:
    """A repository of ``n_files * per_file`` function chunks (one chunk per function)."""
    return {
        f"pkg/mod_{f:03d}.py": "".join(
            f'def f_{f}_{i}(x):\n    """Step {i} of module {f}."""\n    return x * {i} + {f}\n\n\n'
            for i in range(per_file)
        )
        for f in range(n_files)
    }


def direct_collection(server: ChromaServer) -> chromadb.api.models.Collection.Collection:
    """The collection through a plain chromadb client (not the project's ChromaStore)."""
    client = chromadb.HttpClient(
        host="127.0.0.1", port=server.port, settings=ChromaSettings(anonymized_telemetry=False)
    )
    return client.get_collection(load_settings().store.collection_name)


@pytest.fixture
def chroma(neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    with chroma_server_or_skip(tmp_path / "chroma-server") as server:
        monkeypatch.setenv("NEO_CHROMA_URL", server.url)
        yield server


@pytest.fixture
def instance(tmp_path: Path):
    (tmp_path / "dagster").mkdir()
    inst = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    yield inst
    inst.dispose()


def sweep(tenants_path: Path, instance: dg.DagsterInstance, **kw) -> dict[str, dict]:
    results = run_sweeps(load_settings(), load_tenants(tenants_path), instance, force=True, **kw)
    return {f"{r['tenantId']}/{r['repoSlug']}": r for r in results}


def test_sweep_query_and_restart_on_a_chroma_server(
    chroma: ChromaServer, neo_home: Path, tmp_path: Path, instance, monkeypatch, kb: KbHandles
) -> None:
    a = make_repo(
        tmp_path / "widgets",
        {
            "widgets/core.py": "class Widget:\n    def render(self):\n        return 'widget'\n",
            "README.md": "# Widgets\n\n## Rendering\n\nCall render on a widget.\n",
        },
    )
    b = make_repo(tmp_path / "tools", {"tool.py": "def hammer():\n    return 'nail'\n"})
    tenants = write_tenants(
        tmp_path / "tenants.yaml",
        {"acme": [repo_entry("widgets", a.path)], "globex": [repo_entry("tools", b.path)]},
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))

    results = sweep(tenants, instance)
    assert {k: r["outcome"] for k, r in results.items()} == {
        "acme/widgets": "complete",
        "globex/tools": "complete",
    }
    # The rows are on the server (seen by a client of our own), not in a local directory.
    assert not (neo_home / "chroma").exists()
    ledger = kb.ledger
    declared = {c.chunk_id for c in ledger.declared_chunks("acme", "widgets")}
    declared |= {c.chunk_id for c in ledger.declared_chunks("globex", "tools")}
    col = direct_collection(chroma)
    assert set(col.get(include=[])["ids"]) == declared and col.count() == len(declared)

    settings = load_settings()
    store = kb.store
    answer = asyncio.run(
        run_query(settings, store, ledger, "render a widget", tenant="acme", repo=None, k=10)
    )
    hits = answer["results"]
    assert hits and all(h["metadata"]["tenantId"] == "acme" for h in hits)
    assert {h["id"] for h in hits} <= {
        c.chunk_id for c in ledger.declared_chunks("acme", "widgets")
    }

    # Reconciliation against the server: README.md leaves the parser's yield, and its
    # rows are reclaimed on the server, the other tenant's rows untouched.
    readme = {
        c.chunk_id
        for c in ledger.declared_chunks("acme", "widgets")
        if c.source_path == "README.md"
    }
    globex_before = {r["id"] for r in store.tenant_rows("globex")}
    write_tenants(
        tenants,
        {
            "acme": [repo_entry("widgets", a.path, exclude=["README.md"])],
            "globex": [repo_entry("tools", b.path)],
        },
    )
    monkeypatch.setenv("NEO_RECONCILIATION_ENABLED", "true")
    assert sweep(tenants, instance)["acme/widgets"]["outcome"] == "complete"
    reports = run_reconciliation(
        load_settings(), load_tenants(tenants), instance, tenant="acme", apply=True
    )
    assert reports[0]["success"], reports[0]
    assert reports[0]["reclaimed"] == len(readme) > 0
    remaining = set(col.get(include=[])["ids"])
    assert not (remaining & readme)
    assert {r["id"] for r in store.tenant_rows("globex")} == globex_before
    declared = remaining

    # A clean restart of the server keeps every row; the test's open client carries on.
    chroma.stop()
    assert not chroma.alive()
    chroma.start()
    assert store.count() == len(declared)
    assert store.present_ids(sorted(declared)) == declared


def test_server_crash_mid_sweep_defers_then_next_sweep_completes(
    chroma: ChromaServer, tmp_path: Path, instance, monkeypatch, kb: KbHandles
) -> None:
    # Enough small batches that the sweep is still writing when the server dies.
    repo = make_repo(tmp_path / "big", many_functions(n_files=40, per_file=20))
    tenants = write_tenants(tmp_path / "tenants.yaml", {"acme": [repo_entry("big", repo.path)]})
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    monkeypatch.setenv("NEO_EMBEDDING_BATCH_SIZE", "8")

    crashed = threading.Event()
    rows_at_crash: list[int] = []

    def crash_when_rows_appear() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            try:
                count = direct_collection(chroma).count()
            except Exception:  # noqa: BLE001 - collection not created yet
                count = 0
            if count > 0:
                rows_at_crash.append(count)
                chroma.kill()
                crashed.set()
                time.sleep(1.0)  # long enough for the sweep's next writes to be refused
                chroma.start()
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=crash_when_rows_appear, daemon=True)
    watcher.start()
    first = sweep(tenants, instance)["acme/big"]
    watcher.join(timeout=120)
    assert crashed.is_set() and chroma.alive()

    ledger = kb.ledger
    declared = {c.chunk_id for c in ledger.declared_chunks("acme", "big")}
    assert len(declared) == 800
    # A store that died is a write failure: deferred with its code, no fence, no strike
    # (first the durable verdict in the ledger, then what the sweep reported).
    generation = configured_generation(load_settings())
    assert ledger.fences("acme", "big", generation) == []
    assert ledger.strikes("acme", "big", generation) == []
    state = ledger.repo_state("acme", "big")
    assert state["last_outcome"] == codes.OUTCOME_DEFERRED, state
    assert state["deferred_cause_code"] == codes.KB_VECTOR_EMBED_WRITE_ERROR
    assert state["last_ingested_rev"] is None
    present_after_crash = direct_collection(chroma).count()
    assert 0 < present_after_crash < len(declared)
    assert first["outcome"] == codes.OUTCOME_DEFERRED, first
    assert first["deferredCauseCode"] == codes.KB_VECTOR_EMBED_WRITE_ERROR
    assert first["contentPoisonChunks"]["count"] == 0
    assert first["undeliverableChunks"]["count"] == 0

    second = sweep(tenants, instance)["acme/big"]
    assert second["outcome"] == codes.OUTCOME_COMPLETE, second
    assert second["counts"]["alreadyPresent"] == present_after_crash
    assert second["counts"]["embedded"] == len(declared) - present_after_crash
    # Every declared id is there exactly once, and nothing else is.
    col = direct_collection(chroma)
    ids = col.get(where=tenant_filter("acme", "big"), include=[])["ids"]
    assert len(ids) == len(set(ids)) == len(declared) == col.count()
    assert set(ids) == declared
    assert ledger.repo_state("acme", "big")["last_ingested_rev"] == repo.git("rev-parse", "HEAD")
