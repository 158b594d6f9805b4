"""Progress inside a repo: the embedding step's batches reach the CLI's bar in process."""

import io
from pathlib import Path

import dagster as dg
import pytest
from rich.console import Console

from neo_assets.cli.launch import run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.sweep import progress
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


def test_listener_is_scoped_nested_and_never_fails_the_reporter() -> None:
    seen: list[tuple] = []
    progress.report("a/b", 1, 2, 3)  # nobody listens: nothing happens
    with progress.listening(lambda *a: seen.append(("outer", *a))):
        progress.report("a/b", 1, 4, 10)
        with progress.listening(lambda *a: 1 / 0):
            progress.report("a/b", 2, 4, 20)  # a broken listener is ignored
        progress.report("a/b", 3, 4, 30)
    progress.report("a/b", 4, 4, 40)
    assert seen == [("outer", "a/b", 1, 4, 10), ("outer", "a/b", 3, 4, 30)]


def test_cli_sweep_shows_batches_inside_the_repo(
    neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = GitRepo(tmp_path / "widgets")
    for i in range(6):
        repo.write(f"m{i}.py", f"def f{i}():\n    return {i}\n")
    repo.commit("six modules", when=1_700_000_000)
    tenants = write_tenants(tmp_path / "tenants.yaml", {"acme": [repo_entry("widgets", repo.path)]})
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    monkeypatch.setenv("NEO_EMBEDDING_BATCH_SIZE", "2")  # three batches of two
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    out = io.StringIO()
    try:
        results = run_sweeps(
            load_settings(),
            load_tenants(tenants),
            instance,
            console=Console(file=out, width=160, force_terminal=False),
        )
    finally:
        instance.dispose()
    assert [r["outcome"] for r in results] == ["complete"]
    embedded = results[0]["counts"]["embedded"]
    assert embedded == 6
    text = out.getvalue()
    assert "acme/widgets: 6 chunks embedded, batches" in text, text
    assert "3/3" in text, text


def test_the_links_run_reports_its_passes_to_the_cli_and_the_run_log(
    neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = GitRepo(tmp_path / "widgets")
    for i in range(12):
        repo.write(f"m{i}.py", f"def f{i}():\n    return {i}\n")
    repo.commit("twelve modules", when=1_700_000_000)
    tenants = write_tenants(tmp_path / "tenants.yaml", {"acme": [repo_entry("widgets", repo.path)]})
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    out = io.StringIO()
    try:
        results = run_sweeps(
            load_settings(),
            load_tenants(tenants),
            instance,
            console=Console(file=out, width=160, force_terminal=False),
        )
        (links_run,) = [r for r in instance.get_runs() if r.job_name == "links"]
        logged = [
            e.user_message
            for e in instance.all_logs(links_run.run_id)
            if e.user_message.startswith("links acme/widgets:")
        ]
    finally:
        instance.dispose()
    assert [r["outcome"] for r in results] == ["complete"]
    text = out.getvalue()
    # The CLI's links bar ends on the last stage with every row counted.
    assert "acme/widgets links: storing" in text and "12/12 rows" in text, text
    # The run log has each stage (the semantic pass at least once, throttled to 5 s).
    stages = [line.split(": ", 1)[1] for line in logged]
    assert stages[0].startswith("rows read 12/12")
    assert any(s.startswith("temporal pass 12/12") for s in stages)
    assert any(s.startswith("semantic pass") for s in stages)
    assert stages[-1].startswith("storing 12/12"), stages
