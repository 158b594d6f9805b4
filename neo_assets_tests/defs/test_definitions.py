"""The code location loads the way Dagster tools load it."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from neo_assets.definitions import defs

ROOT = Path(__file__).resolve().parents[2]


def test_definitions_hold_the_sweep_graph() -> None:
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert keys >= {
        "repo_envelope",
        "chunk_generation",
        "kb_embeddings",
        "fence_census",
        "kb_status",
    }
    assert defs.resolve_job_def("sweep").partitions_def is not None
    # The lineage the UI draws, and the four sweep assets computed by one step.
    chain = [
        "repo_envelope",
        "chunk_generation",
        "kb_embeddings",
        "fence_census",
        "retrieval_quality",
    ]
    for parent, child in zip(chain, chain[1:], strict=False):
        assert graph.get(dg.AssetKey(child)).parent_keys == {dg.AssetKey(parent)}
    sweep = defs.resolve_job_def("sweep")
    # One step computes the sweep's assets (and the self-evaluation, with its model);
    # the quality checks run after it.
    assert {n.name for n in sweep.graph.nodes} == {
        "sweep_repo",
        "retrieval_quality_quality_gate",
        "retrieval_quality_retrieval_quality_drop",
    }
    assert defs.resolve_job_def("links").partitions_def is not None
    assert defs.resolve_sensor_def("links_sensor")
    assert defs.resolve_sensor_def("sweep_sensor")
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assert node.description and node.owners and node.kinds, key


def test_dagster_definitions_validate_passes(tmp_path: Path) -> None:
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "NEO_HOME": str(tmp_path / "neo")}
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "dagster"),
            "definitions",
            "validate",
            "-m",
            "neo_assets.definitions",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Validation successful" in done.stdout + done.stderr
    assert isinstance(defs, dg.Definitions)


def test_the_tenants_resource_expands_neo_home_to_its_settings_home(
    tmp_path: Path, neo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run may override the settings resource's home: the tenants file's ${NEO_HOME}
    # must follow it, as the ledger and the store do, not the process's NEO_HOME.
    from neo_assets.defs.resources import SettingsResource, TenantsResource

    other = tmp_path / "other-home"
    (other / "repos" / "a").mkdir(parents=True)
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(
        "tenants:\n  - id: acme\n    repos:\n      - slug: a\n"
        "        path: ${NEO_HOME}/repos/a\n        parser: {id: neo-code, version: 1.0.0}\n"
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    resource = TenantsResource(settings=SettingsResource(home=str(other)))
    repo = resource.load().tenants[0].repos[0]
    assert repo.path == (other / "repos" / "a").resolve()
