"""End to end on the embedded default: real git repos, real Chroma, real Dagster runs."""

from pathlib import Path

import dagster as dg
import pytest

from neo_assets.cli.launch import run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.core.ids.chunk_ids import is_chunk_id
from neo_assets.core.ids.stamps import tenant_filter
from neo_assets.services.handles import open_ledger, open_store
from neo_assets.store.chroma_store import STAMP_KEYS
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

SHARED = '"""Shared helper."""\n\n\ndef shared(x):\n    return x * 2\n'


def _repo(path: Path, files: dict[str, str]) -> GitRepo:
    repo = GitRepo(path)
    for rel, text in files.items():
        repo.write(rel, text)
    repo.commit("initial", when=1_700_000_000)
    return repo


@pytest.fixture
def two_tenants(neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    a = _repo(
        tmp_path / "acme-widgets",
        {
            "widgets/core.py": "class Widget:\n    def render(self):\n        return 'w'\n",
            "shared.py": SHARED,
            "README.md": "# Widgets\n\n## Use\n\nCall render.\n",
            "vendor/lib.py": "def vendored():\n    pass\n",
        },
    )
    b = _repo(
        tmp_path / "globex-tools", {"shared.py": SHARED, "tool.py": "def tool():\n    return 1\n"}
    )
    tenants = write_tenants(
        tmp_path / "tenants.yaml",
        {
            "acme": [repo_entry("widgets", a.path, exclude=["vendor/**"])],
            "globex": [repo_entry("tools", b.path)],
        },
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    (tmp_path / "dagster").mkdir(exist_ok=True)
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    yield {"a": a, "b": b, "tenants": tenants, "instance": instance}
    instance.dispose()


def _sweep(env, **kw):
    settings = load_settings()
    return run_sweeps(settings, load_tenants(env["tenants"]), env["instance"], **kw)


def _rows(tenant: str, repo: str | None = None) -> list[dict]:
    with open_store(load_settings()) as store:
        return list(store.iter_rows(tenant_filter(tenant, repo)))


def test_first_sweep_completes_and_stamps_every_row(two_tenants) -> None:
    results = _sweep(two_tenants)
    assert {(r["tenantId"], r["repoSlug"], r["outcome"]) for r in results} == {
        ("acme", "widgets", "complete"),
        ("globex", "tools", "complete"),
    }
    acme = _rows("acme")
    assert acme and all(set(STAMP_KEYS) <= set(r["metadata"]) for r in acme)
    assert all(is_chunk_id(r["id"]) for r in acme)
    assert {r["metadata"]["sourcePath"] for r in acme} == {
        "widgets/core.py",
        "shared.py",
        "README.md",
    }
    assert all(r["metadata"]["revision"] == two_tenants["a"].git("rev-parse", "HEAD") for r in acme)
    assert all(r["metadata"]["tenantConfigVersion"] == 1 for r in acme)
    # The runs are recorded in the persistent instance, so the UI shows them.
    runs = two_tenants["instance"].get_runs()
    assert len(runs) >= 2 and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)


def test_identical_file_in_two_tenants_gives_distinct_ids_each_with_its_own_tenant(
    two_tenants,
) -> None:
    _sweep(two_tenants)
    acme_shared = {r["id"] for r in _rows("acme") if r["metadata"]["sourcePath"] == "shared.py"}
    globex_shared = {r["id"] for r in _rows("globex") if r["metadata"]["sourcePath"] == "shared.py"}
    assert acme_shared and globex_shared and not (acme_shared & globex_shared)
    with open_store(load_settings()) as store:
        rows = store.get_rows(sorted(globex_shared))
    for rid, row in rows.items():
        assert row["metadata"]["tenantId"] == "globex", rid


def test_second_sweep_skips_and_new_commit_sweeps_only_that_repo(two_tenants) -> None:
    _sweep(two_tenants)
    again = _sweep(two_tenants)
    assert {r["outcome"] for r in again} == {"skipped"}
    before = len(_rows("acme"))
    a = two_tenants["a"]
    a.write("widgets/new.py", "def brand_new():\n    return 42\n")
    a.commit("add new", when=1_700_000_100)
    third = {(r["tenantId"], r["outcome"]) for r in _sweep(two_tenants)}
    assert third == {("acme", "complete"), ("globex", "skipped")}
    assert len(_rows("acme")) > before


def test_a_forced_sweep_of_an_unchanged_repo_reuses_its_envelope_and_fills_holes(
    two_tenants,
) -> None:
    """The forced sweep does not list the tree again (the recorded envelope holds at the
    same commit under the same rules) and looks its recorded ids up early: rows deleted
    behind its back are still seen missing and written again."""
    _sweep(two_tenants)
    with open_ledger(load_settings()) as ledger, open_store(load_settings()) as store:
        recorded = ledger.envelope("acme", "widgets")
        assert len(recorded["rules"]) == 64
        victims = sorted(r["id"] for r in _rows("acme", "widgets"))[:2]
        store.delete_ids(victims)

        forced = {r["tenantId"]: r for r in _sweep(two_tenants, force=True)}
        assert forced["acme"]["outcome"] == "complete"
        assert store.present_ids(victims) == set(victims)
        again = ledger.envelope("acme", "widgets")
        assert again["paths"] == recorded["paths"] and again["rules"] == recorded["rules"]
        assert again["recorded_at"] > recorded["recorded_at"]


def test_parser_bump_adds_new_ids_and_keeps_old_rows(two_tenants, tmp_path: Path) -> None:
    _sweep(two_tenants)
    old = {r["id"] for r in _rows("acme")}
    write_tenants(
        two_tenants["tenants"],
        {
            "acme": [
                repo_entry("widgets", two_tenants["a"].path, version="1.1.0", exclude=["vendor/**"])
            ],
            "globex": [repo_entry("tools", two_tenants["b"].path)],
        },
    )
    results = {r["tenantId"]: r for r in _sweep(two_tenants)}
    assert results["acme"]["outcome"] == "complete" and results["globex"]["outcome"] == "skipped"
    rows = _rows("acme")
    versions = {r["metadata"]["parserVersion"] for r in rows}
    assert versions == {"1.0.0", "1.1.0"}
    assert old <= {r["id"] for r in rows}  # nothing overwritten, nothing removed
    new = {r["id"] for r in rows if r["metadata"]["parserVersion"] == "1.1.0"}
    assert len(new) == len(old) and not (new & old)
    assert all(r["metadata"]["tenantConfigVersion"] == 2 for r in rows if r["id"] in new)


def test_dirty_work_tree_is_not_read(two_tenants) -> None:
    a = two_tenants["a"]
    (a.path / "shared.py").write_text("def dirty():\n    pass\n")
    _sweep(two_tenants)
    with open_store(load_settings()) as store:
        docs = store.get_rows([r["id"] for r in _rows("acme", "widgets")], include_documents=True)
    assert not any("dirty" in (row["document"] or "") for row in docs.values())


def test_a_sweep_that_raises_is_recorded_as_failed_with_backoff(two_tenants) -> None:
    _sweep(two_tenants)
    a = two_tenants["a"]
    a.write("more.py", "def more():\n    return 3\n")
    a.commit("more", when=1_700_000_200)
    a.git("update-ref", "-d", "refs/heads/main")  # the declared ref no longer names a commit
    results = {r["tenantId"]: r for r in _sweep(two_tenants)}
    assert results["acme"]["outcome"] == "failed"
    assert results["acme"]["deferredCauseCode"] == "SOURCE_REPO_MISSING"
    with open_ledger(load_settings()) as ledger:
        row = ledger.repo_state("acme", "widgets")
    assert row["last_outcome"] == "failed" and row["consecutive_failures"] == 1
    assert row["deferred_cause_code"] == "SOURCE_REPO_MISSING"
    assert row["next_due_at"] > row["last_attempt_at"]
    assert len(_rows("acme")) > 0  # nothing was lost
