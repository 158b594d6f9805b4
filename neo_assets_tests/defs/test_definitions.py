"""The code location loads the way Dagster tools load it."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

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
    chain = ["repo_envelope", "chunk_generation", "kb_embeddings", "fence_census"]
    for parent, child in zip(chain, chain[1:], strict=False):
        assert graph.get(dg.AssetKey(child)).parent_keys == {dg.AssetKey(parent)}
    sweep = defs.resolve_job_def("sweep")
    assert {n.name for n in sweep.graph.nodes} == {"sweep_repo"}
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
