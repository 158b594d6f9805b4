"""A repo (or a tenant) that leaves tenants.yaml has its code index dropped at the next
sweep launch: derived data never served again, not left in the ledger. Real runs
through ``run_sweeps``, real git repos."""

from pathlib import Path

import dagster as dg
import pytest

from neo_assets.cli.launch import run_sweeps
from neo_assets.code_tools.index_store import file_rows, indexed_revisions
from neo_assets.config.settings import load_settings
from neo_assets.services.handles import open_ledger
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


def test_a_retired_repo_and_tenant_lose_their_code_indexes(
    neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repos = {}
    for name in ("web", "api", "ops"):
        repo = GitRepo(tmp_path / name)
        repo.write(f"{name}/main.py", f"def {name}_entry():\n    return '{name}'\n")
        repo.commit(f"start {name}", when=1_700_000_000)
        repos[name] = repo
    path = tmp_path / "tenants.yaml"
    declared = {
        "acme": [
            repo_entry("web", repos["web"].path, version="2.0.0"),
            repo_entry("api", repos["api"].path, version="2.0.0"),
        ],
        "globex": [repo_entry("ops", repos["ops"].path, version="2.0.0")],
    }
    write_tenants(path, declared)
    monkeypatch.setenv("NEO_TENANTS_FILE", str(path))
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    try:
        settings = load_settings()
        assert {r["outcome"] for r in run_sweeps(settings, load_tenants(path), instance)} == {
            "complete"
        }
        with open_ledger(settings) as ledger:
            assert set(indexed_revisions(ledger, "acme")) == {"web", "api"}
            assert set(indexed_revisions(ledger, "globex")) == {"ops"}
            assert file_rows(ledger, "acme", "api") == 1 and file_rows(ledger, "globex") == 1
        write_tenants(path, {"acme": declared["acme"][:1]})  # api and globex leave
        run_sweeps(settings, load_tenants(path), instance)
        with open_ledger(settings) as ledger:
            assert set(indexed_revisions(ledger, "acme")) == {"web"}
            assert dict(indexed_revisions(ledger, "globex")) == {}
            # Their per-file rows went with them; the staying repo's did not.
            assert (file_rows(ledger, "acme", "api"), file_rows(ledger, "globex")) == (0, 0)
            assert file_rows(ledger, "acme", "web") == 1
    finally:
        instance.dispose()
