"""The store, the ledger and the provider belong to one run or tick: opened on first use,
closed when it ends, so no file of the ledger or of Chroma stays open in the process."""

import os
import threading
import time
from pathlib import Path

import dagster as dg
import pytest

from neo_assets.cli.launch import run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.definitions import defs
from neo_assets.defs.partitions import TENANT_REPOS
from neo_assets.defs.resources import (
    LedgerResource,
    ProviderResource,
    SettingsResource,
    StoreResource,
    default_resources,
)
from neo_assets.sweep.defs import sweep_sensor
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


def open_files(*roots: Path) -> list[str]:
    """Files under ``roots`` this process holds open (from /proc/self/fd)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since the listing
            continue
        if any(target.startswith(str(root)) for root in roots):
            found.append(target)
    return sorted(found)


def closed_soon(*roots: Path, within_s: float = 5.0) -> list[str]:
    """What is still open under ``roots`` after up to ``within_s`` (Chroma's Rust side
    closes its SQLite connections a moment after the client is released)."""
    deadline = time.monotonic() + within_s
    while (still := open_files(*roots)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return still


def kb_files() -> tuple[Path, Path]:
    settings = load_settings()
    return settings.store.home_dir / "ledger.sqlite", settings.store.chroma_dir


@pytest.fixture
def env(neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    repo = GitRepo(tmp_path / "r")
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("one", when=1_700_000_000)
    tenants = write_tenants(tmp_path / "tenants.yaml", {"acme": [repo_entry("widgets", repo.path)]})
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    instance.add_dynamic_partitions(TENANT_REPOS, ["acme/widgets"])
    yield instance
    instance.dispose()


def test_after_a_sweep_run_no_ledger_or_chroma_file_is_open(env) -> None:
    result = defs.resolve_job_def("sweep").execute_in_process(
        instance=env, partition_key="acme/widgets"
    )
    assert result.output_for_node("sweep_repo", "fence_census")["outcome"] == "complete"
    ledger_file, chroma_dir = kb_files()
    assert ledger_file.exists() and chroma_dir.exists()  # the run did open both
    assert closed_soon(ledger_file, chroma_dir) == []


def test_after_the_clis_sweeps_no_ledger_or_chroma_file_is_open(env) -> None:
    (result,) = run_sweeps(load_settings(), load_tenants(Path(os.environ["NEO_TENANTS_FILE"])), env)
    assert result["outcome"] == "complete"  # a sweep run, its links run and the status run
    assert closed_soon(*kb_files()) == []


def test_after_a_sensor_tick_the_ledger_is_closed(env) -> None:
    with dg.build_sensor_context(instance=env, resources=default_resources()) as context:
        result = sweep_sensor(context)
        ledger_file, _ = kb_files()
        assert open_files(ledger_file)  # the tick read the ledger through its resource
    assert [r.partition_key for r in result.run_requests] == ["acme/widgets"]
    assert closed_soon(ledger_file) == []


def test_a_run_opens_each_handle_once_and_closes_it_at_teardown(neo_home: Path) -> None:
    settings = SettingsResource()
    resources = {
        "store": StoreResource(settings=settings),
        "ledger": LedgerResource(settings=settings),
    }
    with dg.build_resources(resources) as built:
        ledger, store = built.ledger.get(), built.store.get()
        assert built.ledger.get() is ledger and built.store.get() is store
        assert not ledger.closed and not store.closed
        ledger.repo_state("acme", "widgets")
        store.count()
    assert ledger.closed and store.closed
    assert built.ledger.closed and built.store.closed
    with pytest.raises(RuntimeError, match="ended"):
        built.ledger.get()
    assert closed_soon(*kb_files()) == []


def test_a_handle_never_asked_for_is_never_opened(neo_home: Path) -> None:
    with dg.build_resources({"store": StoreResource(settings=SettingsResource())}) as built:
        pass
    assert not built.store.opened and built.store.closed
    assert not load_settings().store.chroma_dir.exists()


def test_threads_asking_at_once_share_one_store(neo_home: Path) -> None:
    with dg.build_resources({"store": StoreResource(settings=SettingsResource())}) as built:
        got: list[object] = []
        threads = [threading.Thread(target=lambda: got.append(built.store.get())) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(got) == 4 and all(s is got[0] for s in got)


def test_the_runs_provider_is_closed_at_teardown(neo_home: Path) -> None:
    with dg.build_resources({"provider": ProviderResource(settings=SettingsResource())}) as built:
        provider = built.provider.get()
        assert built.provider.build() is provider  # the sweep asset's name for it
        closed: list[bool] = []
        original = provider.aclose

        async def recording_close() -> None:
            closed.append(True)
            await original()

        provider.aclose = recording_close
        assert not closed
    assert closed == [True]


def test_a_resource_outside_a_run_says_how_to_open_a_handle() -> None:
    with pytest.raises(RuntimeError, match="services.handles"):
        LedgerResource(settings=SettingsResource()).get()
