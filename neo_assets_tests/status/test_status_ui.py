"""kb_status is current after a sensor-driven failure, and the UI shows it (issue 26, 4).

A real git repo swept by runs the sweep sensor requested; a typo in ``ref:`` makes the
next sensor-driven sweep fail; ``status_refresh_sensor`` (evaluated against the real
instance, as the daemon would) requests one status run, whose ``kb_status`` summary says
the repo failed, with the error's first line and the fix. A real ``dagster-webserver`` then
serves that instance and headless Chromium renders the asset's page: the screenshot is
saved in the test's tmp dir, and with NEO_UPDATE_UI_SCREENSHOT=1 in
``docs/ui-kb-status-failed.png``.
"""

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from neo_assets.cli.launch import QUIET_CONSOLE
from neo_assets.defs.partition_sync import apply_requests
from neo_assets.defs.resources import default_resources
from neo_assets_tests.defs.test_ui import (
    CHROMIUM,
    _chromium,
    _png_size,
    _visible_text,
    dagster_webserver,
    instance_env,
)
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

ROOT = Path(__file__).resolve().parents[2]
DOCS_SCREENSHOT = ROOT / "docs" / "ui-kb-status-failed.png"
STATUS_PAGE = "/assets/kb_status"


def _defs() -> Any:
    from neo_assets.definitions import defs

    return defs


def _tick(instance: dg.DagsterInstance, name: str, cursor: str | None = None) -> Any:
    sensor = _defs().resolve_sensor_def(name)
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources=default_resources()
    ) as ctx:
        result = sensor(ctx)
    apply_requests(instance, result.dynamic_partitions_requests or [])
    return result


def _launch(instance: dg.DagsterInstance, job: str, request: dg.RunRequest) -> Any:
    return (
        _defs()
        .resolve_job_def(job)
        .execute_in_process(
            instance=instance,
            run_config=QUIET_CONSOLE,
            partition_key=request.partition_key,
            tags=request.tags,
            raise_on_error=False,
        )
    )


def _status_summary(instance: dg.DagsterInstance) -> str:
    event = instance.get_latest_materialization_event(dg.AssetKey("kb_status"))
    assert event is not None and event.asset_materialization is not None
    return str(event.asset_materialization.metadata["summary"].value)


@pytest.fixture(scope="module")
def failed_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("status-ui")
    repo = GitRepo(base / "widgets")
    repo.write("widgets/core.py", "class Widget:\n    def render(self):\n        return 'w'\n")
    repo.commit("initial", when=1_700_000_000)
    tenants = base / "tenants.yaml"
    write_tenants(tenants, {"acme": [repo_entry("widgets", repo.path, ref="main")]})
    home = base / "neo"
    env = instance_env(home, tenants)
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith("NEO_"):
                mp.delenv(name)
        for name in ("NEO_HOME", "DAGSTER_HOME", "NEO_TENANTS_FILE"):
            mp.setenv(name, env[name])
        instance = dg.DagsterInstance.from_config(str(home / "dagster"))
        try:
            facts = _fail_by_sensor(instance, repo, tenants)
        finally:
            instance.dispose()
    yield {"base": base, "env": env, **facts}


def _fail_by_sensor(instance: dg.DagsterInstance, repo: GitRepo, tenants: Path) -> dict:
    first = _tick(instance, "sweep_sensor")
    (request,) = first.run_requests
    assert _launch(instance, "sweep", request).success
    refresh = _tick(instance, "status_refresh_sensor")
    (status_request,) = refresh.run_requests
    assert _launch(instance, "status", status_request).success
    assert "**1** complete" in _status_summary(instance)
    assert _tick(instance, "status_refresh_sensor", refresh.cursor).run_requests == []

    write_tenants(tenants, {"acme": [repo_entry("widgets", repo.path, ref="mian")]})
    moved = _tick(instance, "sweep_sensor", first.cursor)
    (request,) = moved.run_requests
    assert not _launch(instance, "sweep", request).success  # the typo fails the sweep
    after = _tick(instance, "status_refresh_sensor", refresh.cursor)
    (status_request,) = after.run_requests  # a failed run is followed too
    assert _launch(instance, "status", status_request).success
    return {"summary": _status_summary(instance)}


def test_kb_status_is_refreshed_after_a_sensor_driven_failure_and_says_the_fix(
    failed_world,
) -> None:
    summary = failed_world["summary"]
    assert "1 repos: **1** failed." in summary
    (detail,) = [line for line in summary.splitlines() if line.startswith("- `acme/widgets`")]
    assert "**failed**" in detail and "mian" in detail  # the error's first line
    assert "Fix: set ref:" in detail  # and its fix, once
    assert detail.count("Fix:") == 1


@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian's chromium is not installed at /usr/bin/chromium (apt-get install chromium)",
)
def test_chromium_shows_the_failure_and_its_fix_on_kb_status(failed_world) -> None:
    base: Path = failed_world["base"]
    with dagster_webserver(failed_world["env"], base) as running:
        url = running["url"]
        page = url + STATUS_PAGE
        text = ""
        for attempt, budget in enumerate((30_000, 90_000)):
            dom = _chromium(["--dump-dom", page], base / f"profile-dom-{attempt}", budget)
            text = _visible_text(dom.stdout.decode("utf-8", "replace"))
            if "failed" in text and "mian" in text:
                break
        assert "kb_status" in text
        assert "failed" in text and "mian" in text, text[:3000]
        shot = base / "ui-kb-status-failed.png"
        done = _chromium([f"--screenshot={shot}", page], base / "profile-shot", 30_000)
        assert shot.exists(), done.stderr.decode("utf-8", "replace")[-2000:]
        data = shot.read_bytes()
        assert _png_size(data) == (1600, 1000)
        assert 20_000 < len(data) < 600_000
        if os.environ.get("NEO_UPDATE_UI_SCREENSHOT") == "1":
            DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
            shutil.copyfile(shot, DOCS_SCREENSHOT)
