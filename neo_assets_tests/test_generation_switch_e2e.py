"""Changing the embedding model end to end, on real Chroma through real Dagster runs:
hashing (384-d) -> a 64-d OpenAI-compatible server that dies after its first request
(the new generation is partial: every query still answers, from the old generation
only) -> a healthy server (complete: answers come from the new generation only, its
digest the status's) -> reconciliation with reclamation on (the old generation is gone,
nothing is lost)."""

import asyncio
import threading
import time
from pathlib import Path

import dagster as dg
import pytest

from neo_assets.cli.launch import run_reconciliation, run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.defs.resources import default_resources
from neo_assets.generations.records import generation_records
from neo_assets.generations.serving import configured_generation, generation_store
from neo_assets.query.one_shot import run_query
from neo_assets.services.handles import open_ledger, open_store
from neo_assets.status.defs import kb_status
from neo_assets.status.report import build_status
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

FILES = 12


def module(i: int) -> str:
    return (
        "\n\n".join(
            f"def handler_{i}_{j}(value):\n    total = value * {j + 2} + {i}\n    return total\n"
            for j in range(3)
        )
        + "\n"
    )


def query(settings, text: str = "handler total value") -> dict:
    with open_ledger(settings) as ledger, open_store(settings) as store:
        return asyncio.run(run_query(settings, store, ledger, text, tenant="acme", repo=None, k=50))


def status(settings, tenants) -> dict:
    with open_ledger(settings) as ledger, open_store(settings) as store:
        return build_status(settings, tenants, ledger, store)["repos"][0]


def kb_status_frame(instance):
    result = dg.materialize([kb_status], resources=default_resources(), instance=instance)
    assert result.success
    materialization = result.asset_materializations_for_node("kb_status")[0]
    preview = materialization.metadata["preview"].value
    assert {"servingGeneration", "buildingGeneration"} <= {c.name for c in preview.schema.columns}
    return result.output_for_node("kb_status")


def kill_after_first_answer(srv: FaultServerSupervisor) -> threading.Thread:
    """Kill the server once its second request arrived: with one request in flight at a
    time, the first was answered (a request is counted before its answer is written, so
    "completed" would race the answer); the second is held by the latency."""

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if srv.stats().get("requests_received", 0) >= 2:
                srv.kill()
                return
            time.sleep(0.005)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_model_switch_with_no_hole_no_mixed_vectors_then_reclaim(
    neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = GitRepo(tmp_path / "r")
    for i in range(FILES):
        repo.write(f"pkg/mod_{i:02d}.py", module(i))
    repo.commit("one", when=1_700_000_000)
    tenants_path = write_tenants(
        tmp_path / "tenants.yaml", {"acme": [repo_entry("widgets", repo.path, version="2.0.0")]}
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants_path))
    tenants = load_tenants(tenants_path)
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    srv = FaultServerSupervisor(tmp_path / "fault", dimensions=64, restart=False)
    try:
        # --- 1. hashing, 384-d: complete.
        settings = load_settings()
        hashing = configured_generation(settings)
        [first] = run_sweeps(settings, tenants, instance)
        assert first["outcome"] == "complete"
        chunks = first["counts"]["chunks"]
        before = query(settings)
        assert before["embeddingGeneration"] == hashing and len(before["results"]) == chunks

        # --- 2. a 64-d OpenAI-compatible server that dies after its first request.
        srv.start()
        srv.configure(latency_s=0.4)  # the second request is in flight when it dies
        for name, value in {
            "NEO_EMBEDDING_PROVIDER": "openai_compatible",
            "NEO_EMBEDDING_BASE_URL": srv.base_url,
            "NEO_EMBEDDING_MODEL": "fake-embed-64",
            "NEO_EMBEDDING_DIMENSIONS": "64",
            "NEO_EMBEDDING_BATCH_SIZE": "4",
            "NEO_EMBEDDING_MAX_INFLIGHT": "1",
            "NEO_EMBEDDING_RECOVERY_MAX_WAIT_S": "0.3",
        }.items():
            monkeypatch.setenv(name, value)
        settings = load_settings()
        new = configured_generation(settings)
        assert new != hashing
        watcher = kill_after_first_answer(srv)
        [partial] = run_sweeps(settings, tenants, instance)
        watcher.join(5)
        srv.wait_down()
        assert partial["outcome"] == "deferred", partial
        with open_ledger(settings) as ledger, open_store(settings) as store:
            built = generation_store(settings, ledger, store, new).count()
        assert 0 < built < chunks  # partial
        # Every query still answers, from the old generation only (its provider, hashing,
        # rebuilt from the ledger; the configured server is dead).
        during = query(settings)
        assert during["embeddingGeneration"] == hashing
        assert {h["metadata"]["embeddingGeneration"] for h in during["results"]} == {hashing}
        assert [h["id"] for h in during["results"]] == [h["id"] for h in before["results"]]
        snap = status(settings, tenants)
        assert snap["servingGeneration"] == hashing and snap["buildingGeneration"] == new
        assert snap["buildingProgress"]["state"] == "building"
        assert snap["buildingProgress"]["present"] < snap["buildingProgress"]["chunks"] == chunks
        # Reclamation on while the tenant is still served by the old generation: nothing
        # of it is reclaimable; the checks pass over both generations.
        monkeypatch.setenv("NEO_RECONCILIATION_ENABLED", "true")
        [early] = run_reconciliation(load_settings(), tenants, instance, apply=True)
        monkeypatch.delenv("NEO_RECONCILIATION_ENABLED")
        assert early["success"] and early["generations"]["reclaimable"] == {}, early
        assert all(c["passed"] for n, c in early["checks"].items() if n != "generation_residue")
        assert query(settings)["embeddingGeneration"] == hashing
        # The Dagster UI's kb_status shows the same, in its frame and its preview.
        frame = kb_status_frame(instance)
        assert frame.loc[0, "servingGeneration"] == hashing
        assert frame.loc[0, "buildingGeneration"] == new

        # --- 3. a healthy server: complete; answers from the new generation only.
        srv.configure(wait=False, latency_s=0)
        srv.start()
        [done] = run_sweeps(settings, tenants, instance, force=True)
        assert done["outcome"] == "complete", done
        after = query(settings)
        snap = status(settings, tenants)
        assert after["embeddingGeneration"] == new == snap["servingGeneration"]
        assert snap["buildingGeneration"] is None and snap["embeddingGeneration"] == new
        assert {h["metadata"]["embeddingGeneration"] for h in after["results"]} == {new}
        assert len(after["results"]) == chunks and snap["rows"] == chunks

        # --- 4. reconciliation with reclamation on: the old generation goes, nothing lost.
        monkeypatch.setenv("NEO_RECONCILIATION_ENABLED", "true")
        settings = load_settings()
        [report] = run_reconciliation(settings, tenants, instance, apply=True)
        assert report["success"], report
        old = report["generations"]["reclaimable"][hashing]
        assert old["reclaimed"] == chunks and old["dropped"] is True
        with open_ledger(settings) as ledger:
            assert generation_records(ledger)[hashing].reclaimed
        final = query(settings)
        assert final["embeddingGeneration"] == new
        assert [h["id"] for h in final["results"]] == [h["id"] for h in after["results"]]
        assert status(settings, tenants)["rows"] == chunks
    finally:
        srv.stop()
        instance.dispose()
