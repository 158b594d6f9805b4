"""The sweep's provider as the lane sees it, through ``run_sweep`` against the fault server:
the provider-wide slots every process shares, and a batch cap learned once for the
provider and remembered in the ledger for every later sweep."""

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neo_assets.config.settings import load_settings
from neo_assets.core import codes
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.slot_backend import slots_for
from neo_assets.services.handles import build_provider
from neo_assets.store.batch_caps import provider_batch_cap
from neo_assets.sweep.context import RepoContext
from neo_assets.sweep.run import SweepInputs, run_sweep
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.fakes.fixtures import fault_server_fixture
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import KbHandles
from neo_assets_tests.sweep_harness import DIMENSIONS, MODEL, sweep_env_vars, text_file
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

server_module = fault_server_fixture(scope="module", dimensions=DIMENSIONS)


@pytest.fixture
def server(server_module: FaultServerSupervisor) -> Iterator[FaultServerSupervisor]:
    server_module.reset()
    server_module.wait_idle(timeout_s=20)
    yield server_module
    server_module.reset()


def files(tag: str, n: int) -> dict[str, str]:
    return {
        f"{tag}{i}.txt": text_file(f"{tag} note {i}: words the provider embeds") for i in range(n)
    }


@pytest.fixture
def repo(
    neo_home: Path, tmp_path: Path, server: FaultServerSupervisor, monkeypatch: pytest.MonkeyPatch
) -> GitRepo:
    repo = GitRepo(tmp_path / "repo")
    tenants = write_tenants(tmp_path / "tenants.yaml", {"acme": [repo_entry("w", repo.path)]})
    for name, value in sweep_env_vars(server).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    monkeypatch.setenv("NEO_PROVIDER_SLOTS_DIR", str(tmp_path / "slots"))
    return repo


def sweep(repo: GitRepo, progress: Any = None) -> dict[str, Any]:
    settings = load_settings()
    tenant = load_tenants(settings.store.resolved_tenants_file).tenants[0]
    kb = KbHandles()
    try:
        result = run_sweep(
            SweepInputs(
                ctx=RepoContext(tenant=tenant, repo=tenant.repos[0]),
                settings=settings,
                ledger=kb.ledger,
                open_store=lambda: kb.store,
                provider=build_provider(settings),
                run_id=str(uuid.uuid4()),
                progress=progress,
            )
        )
    finally:
        kb.close()
    return result.to_doc()


def test_a_sweep_waits_for_another_processs_solo_dispatch_on_the_same_provider(
    repo: GitRepo, server: FaultServerSupervisor, tmp_path: Path
) -> None:
    """The lane in a real sweep takes the provider-wide slot locks (a request another
    process sends alone holds it back), so a strike there is attributable across sweeps."""
    for name, text in files("held", 8).items():
        repo.write(name, text)
    repo.commit("eight notes", when=1_700_000_000)
    slots = slots_for("openai_compatible", server.base_url, MODEL, 2, tmp_path / "slots")

    async def hold() -> Any:
        return await slots.acquire(CancelScope(label="other-sweep"), solo=True, max_wait_s=5)

    held = asyncio.run(hold())
    assert held.alone
    started = threading.Event()
    out: dict[str, Any] = {}

    def progress(done: int, total: int, embedded: int) -> None:
        started.set()  # the lane's first report comes just before its first dispatch

    worker = threading.Thread(target=lambda: out.update(sweep(repo, progress)))
    before = server.stats()["inputs_received"]
    worker.start()
    try:
        assert started.wait(60), "the lane never started"
        time.sleep(1.0)
        # another process holds every slot: not one input reached the server meanwhile
        assert server.stats()["inputs_received"] == before
    finally:
        slots.release(held)
        worker.join(60)
    assert out["outcome"] == codes.OUTCOME_COMPLETE
    assert server.stats()["inputs_received"] > before


def test_a_learned_batch_cap_is_remembered_and_a_new_sweep_sends_no_refused_request(
    repo: GitRepo, server: FaultServerSupervisor
) -> None:
    """TEI's 413 "batch size 4 > maximum allowed batch size 2": learned by the first sweep
    and kept in the ledger for the provider; the next sweep (a new lane, a new provider
    object, as in a new process) starts at the cap and is refused nothing."""
    server.configure(max_batch=2)
    for name, text in files("cap", 12).items():
        repo.write(name, text)
    repo.commit("twelve notes", when=1_700_000_000)
    refused = server.stats().get("requests_error_status", 0)
    first = sweep(repo)
    assert first["outcome"] == codes.OUTCOME_COMPLETE
    assert server.stats()["requests_error_status"] > refused  # learned the hard way once
    for name, text in files("more", 12).items():
        repo.write(name, text)
    repo.commit("twelve more", when=1_700_000_100)
    refused = server.stats()["requests_error_status"]
    second = sweep(repo)
    assert second["outcome"] == codes.OUTCOME_COMPLETE
    assert second["counts"]["embedded"] >= 12
    assert server.stats()["requests_error_status"] == refused  # not one refused request
    settings = load_settings()
    kb = KbHandles()
    try:
        remembered = provider_batch_cap(
            kb.ledger, "openai_compatible", settings.embedding.base_url or "", MODEL
        )
    finally:
        kb.close()
    assert remembered is not None and remembered.cap == 2
    assert "maximum allowed batch size 2" in remembered.evidence
