"""The Dagster UI as the operator sees it: a real ``dagster-webserver`` on a loopback port,
against a temporary instance holding one real sweep; asserted through its GraphQL API and
through headless Chromium rendering the asset graph.

The screenshot is saved in the test's tmp dir; with NEO_UPDATE_UI_SCREENSHOT=1 it also
refreshes ``docs/ui-asset-graph.png``.
"""

import contextlib
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import httpx
import pytest

from neo_assets.cli.launch import run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.definitions import defs
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
DOCS_SCREENSHOT = ROOT / "docs" / "ui-asset-graph.png"
LOCATION = "neo_assets.definitions"
SWEEP_ASSETS = {"repo_envelope", "chunk_generation", "kb_embeddings", "fence_census", "kb_status"}
# The sweep group's lineage page: the four partitioned assets and kb_status downstream.
GRAPH_PATH = f"/locations/{LOCATION}/asset-groups/sweep/lineage"
LOAD_TIMEOUT_S = 240.0

WORKSPACE_QUERY = """
{ workspaceOrError { __typename ... on Workspace { locationEntries {
    name loadStatus
    locationOrLoadError { __typename ... on PythonError { message } }
} } } }
"""
ASSETS_QUERY = """
{ assetNodes {
    assetKey { path } groupName description kinds
    owners { __typename ... on TeamAssetOwner { team } ... on UserAssetOwner { email } }
    assetMaterializations(limit: 1) { runId partition }
    assetChecksOrError { __typename ... on AssetChecks { checks { name description } } }
} }
"""
AUTOMATION_QUERY = """
{ repositoriesOrError { __typename ... on RepositoryConnection { nodes {
    name location { name }
    sensors { name description defaultStatus }
    schedules { name description cronSchedule defaultStatus }
} } } }
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sweep_once(env: dict[str, str]) -> None:
    """One real sweep into the instance the webserver will read, so assets have events."""
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith("NEO_"):
                mp.delenv(name)
        for name in ("NEO_HOME", "DAGSTER_HOME", "NEO_TENANTS_FILE"):
            mp.setenv(name, env[name])
        instance = dg.DagsterInstance.local_temp(env["DAGSTER_HOME"])
        try:
            results = run_sweeps(
                load_settings(), load_tenants(Path(env["NEO_TENANTS_FILE"])), instance
            )
        finally:
            instance.dispose()
    assert [r["outcome"] for r in results] == ["complete"], results


def _graphql(url: str, query: str) -> dict[str, Any]:
    response = httpx.post(f"{url}/graphql", json={"query": query}, timeout=60.0)
    response.raise_for_status()
    doc = response.json()
    assert not doc.get("errors"), doc["errors"]
    return doc["data"]


def _wait_loaded(url: str, proc: subprocess.Popen, log: Path) -> dict[str, Any]:
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    last: Any = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"dagster-webserver exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
        try:
            data = _graphql(url, WORKSPACE_QUERY)
        except (httpx.HTTPError, ValueError) as exc:
            last = exc
        else:
            entries = data["workspaceOrError"].get("locationEntries") or []
            last = entries
            if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                return data
        time.sleep(1.0)
    pytest.fail(
        f"code location not loaded after {LOAD_TIMEOUT_S}s ({last}):\n{log.read_text()[-4000:]}"
    )


def instance_env(home: Path, tenants: Path, **extra: str) -> dict[str, str]:
    """The environment of an operator's instance under ``home``: Dagster's home beside
    the data, no first-visit community pop-up over the pages, no telemetry."""
    (home / "dagster").mkdir(parents=True, exist_ok=True)
    (home / "dagster" / "dagster.yaml").write_text(
        "nux:\n  enabled: false\ntelemetry:\n  enabled: false\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEO_")}
    env.update(
        {
            "NEO_HOME": str(home),
            "DAGSTER_HOME": str(home / "dagster"),
            "NEO_TENANTS_FILE": str(tenants),
            "DAGSTER_DISABLE_TELEMETRY": "1",
            "ANONYMIZED_TELEMETRY": "False",
            **extra,
        }
    )
    return env


@contextlib.contextmanager
def dagster_webserver(env: dict[str, str], base: Path) -> Iterator[dict[str, Any]]:
    """A real ``dagster-webserver`` on loopback over ``env``'s instance, loaded; stopped
    after."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = base / "webserver.log"
    webserver_bin = Path(sys.executable).parent / "dagster-webserver"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(webserver_bin), "-m", LOCATION, "-h", "127.0.0.1", "-p", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        workspace = _wait_loaded(url, proc, log)
        yield {"url": url, "workspace": workspace, "base": base, "log": log}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)


@pytest.fixture(scope="module")
def webserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("ui")
    repo = GitRepo(base / "widgets")
    repo.write("widgets/core.py", "class Widget:\n    def render(self):\n        return 'w'\n")
    repo.write("README.md", "# Widgets\n\n## Use\n\nCall render.\n")
    repo.commit("initial", when=1_700_000_000)
    tenants = write_tenants(base / "tenants.yaml", {"acme": [repo_entry("widgets", repo.path)]})
    env = instance_env(base / "neo", tenants)
    _sweep_once(env)
    with dagster_webserver(env, base) as running:
        yield running


def test_graphql_shows_the_asset_graph_checks_sensors_and_schedules(webserver) -> None:
    url = webserver["url"]
    (entry,) = webserver["workspace"]["workspaceOrError"]["locationEntries"]
    assert entry["name"] == LOCATION
    assert entry["locationOrLoadError"]["__typename"] == "RepositoryLocation", entry

    graph = defs.resolve_asset_graph()
    nodes = {"/".join(n["assetKey"]["path"]): n for n in _graphql(url, ASSETS_QUERY)["assetNodes"]}
    declared = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert SWEEP_ASSETS <= set(nodes)
    assert set(nodes) == declared
    for key, node in nodes.items():
        assert node["description"] and node["groupName"] and node["kinds"], key
        assert node["owners"], key
    for key in SWEEP_ASSETS:  # the sweep was seen: each asset has its materialization
        assert nodes[key]["assetMaterializations"], key
    assert nodes["repo_envelope"]["assetMaterializations"][0]["partition"] == "acme/widgets"

    shown_checks = {
        (key, check["name"])
        for key, node in nodes.items()
        for check in node["assetChecksOrError"].get("checks", [])
    }
    declared_checks = {(k.asset_key.to_user_string(), k.name) for k in graph.asset_check_keys}
    assert shown_checks == declared_checks

    repo_def = defs.get_repository_def()
    (repository,) = _graphql(url, AUTOMATION_QUERY)["repositoriesOrError"]["nodes"]
    sensors = {s["name"]: s for s in repository["sensors"]}
    schedules = {s["name"]: s for s in repository["schedules"]}
    assert set(sensors) == {s.name for s in repo_def.sensor_defs}
    assert set(schedules) == {s.name for s in repo_def.schedule_defs}
    assert {"sweep_sensor", "asset_check_alert_sensor"} <= set(sensors)
    assert "forced_sweep_schedule" in schedules
    for item in [*sensors.values(), *schedules.values()]:
        assert item["description"], item["name"]
    assert sensors["asset_check_alert_sensor"]["defaultStatus"] == "STOPPED"
    assert schedules["forced_sweep_schedule"]["defaultStatus"] == "STOPPED"
    assert schedules["forced_sweep_schedule"]["cronSchedule"] == "0 2 * * *"


def _chromium(args: list[str], profile: Path, budget_ms: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            "--window-size=1600,1000",
            f"--virtual-time-budget={budget_ms}",
            *args,
        ],
        capture_output=True,
        timeout=180,
        check=False,
    )


def _visible_text(html: str) -> str:
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S | re.I)
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


@pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian's chromium is not installed at /usr/bin/chromium (apt-get install chromium)",
)
def test_chromium_renders_the_asset_graph(webserver) -> None:
    page = webserver["url"] + GRAPH_PATH
    base: Path = webserver["base"]
    text = ""
    # Dagster's UI is a JS app: virtual time runs its timers to completion while network
    # requests hold it; a slow machine gets one more, longer try.
    for attempt, budget in enumerate((30_000, 90_000)):
        dom = _chromium(["--dump-dom", page], base / f"profile-dom-{attempt}", budget)
        text = _visible_text(dom.stdout.decode("utf-8", "replace"))
        if SWEEP_ASSETS <= set(re.findall(r"[a-z_]+", text)):
            break
    missing = sorted(a for a in SWEEP_ASSETS if a not in text)
    assert not missing, f"asset graph page lacks {missing}; page text: {text[:2000]}"
    assert "Lineage" in text and "partition" in text

    shot = base / "ui-asset-graph.png"
    done = _chromium([f"--screenshot={shot}", page], base / "profile-shot", 30_000)
    assert shot.exists(), done.stderr.decode("utf-8", "replace")[-2000:]
    data = shot.read_bytes()
    assert _png_size(data) == (1600, 1000)
    assert 20_000 < len(data) < 500_000  # a rendered page, not a blank one; docs-sized
    if os.environ.get("NEO_UPDATE_UI_SCREENSHOT") == "1":
        DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, DOCS_SCREENSHOT)
