"""A quiet knowledge base launches no runs, under every provider and with the model
spellings that used to give the due check a digest of its own (Gemini's ``models/``
prefix, sentence-transformers with no model set)."""

from pathlib import Path

import dagster as dg
import pytest

from neo_assets.cli.launch import run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.defs.partition_sync import apply_requests
from neo_assets.defs.resources import default_resources
from neo_assets.sweep.defs import sweep_sensor
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.extras import require_sentence_transformers
from neo_assets_tests.fakes.fixtures import fault_server_fixture
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

fault_server_mod = fault_server_fixture(scope="module", dimensions=32)


def _tick(instance, cursor):
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources=default_resources()
    ) as ctx:
        result = sweep_sensor(ctx)
    apply_requests(instance, result.dynamic_partitions_requests)
    return result


def _server_env(srv, kind: str) -> dict[str, str]:
    env = {"NEO_EMBEDDING_DIMENSIONS": "32", "NEO_EMBEDDING_BASE_URL": srv.base_url}
    if kind == "gemini":
        env |= {"NEO_EMBEDDING_MODEL": "models/text-embedding-004", "NEO_EMBEDDING_API_KEY": "k"}
    else:
        env |= {"NEO_EMBEDDING_MODEL": "fake-embed"}
    return env


@pytest.mark.parametrize(
    "kind", ["hashing", "sentence_transformers", "openai_compatible", "ollama", "gemini"]
)
def test_quiet_knowledge_base_launches_no_runs(
    kind, neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request
) -> None:
    env: dict[str, str] = {}
    if kind == "sentence_transformers":
        require_sentence_transformers()
    elif kind != "hashing":
        srv = request.getfixturevalue("fault_server_mod")
        srv.reset()
        env = _server_env(srv, kind)
    monkeypatch.setenv("NEO_EMBEDDING_PROVIDER", kind)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    repo = GitRepo(tmp_path / "r")
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("one", when=1_700_000_000)
    tenants = write_tenants(tmp_path / "tenants.yaml", {"acme": [repo_entry("widgets", repo.path)]})
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    (tmp_path / "dagster").mkdir(exist_ok=True)
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    try:
        results = run_sweeps(load_settings(), load_tenants(tenants), instance)
        assert [r["outcome"] for r in results] == ["complete"], results
        first = _tick(instance, None)
        assert first.run_requests == []
        second = _tick(instance, first.cursor)
        assert second.run_requests == []
    finally:
        instance.dispose()
