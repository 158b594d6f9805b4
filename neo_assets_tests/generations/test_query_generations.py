"""A query when the serving generation's provider is gone: a clear notice and an answer
from the generation that can be embedded; when none can, a clear error (CLI exit 1, no
traceback). Real git repo, real Chroma, a real OpenAI-compatible server in a subprocess."""

import asyncio
import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neo_assets.cli.app import app
from neo_assets.config.settings import load_settings
from neo_assets.generations.serving import configured_generation
from neo_assets.query.one_shot import run_query
from neo_assets.query.serving import QueryUnavailable
from neo_assets.services.handles import open_ledger, open_store
from neo_assets.sweep.context import RepoContext
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.fakes.fixtures import fault_server  # noqa: F401 - fixture
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import sweep_once
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


def query() -> dict:
    settings = load_settings()
    with open_ledger(settings) as ledger, open_store(settings) as store:
        return asyncio.run(
            run_query(settings, store, ledger, "render", tenant="acme", repo=None, k=10)
        )


def test_an_unreachable_old_provider_is_named_and_the_answer_comes_from_what_can_embed(
    neo_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fault_server,  # noqa: F811
) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.write("w.py", "class Widget:\n    def render(self):\n        return 'w'\n")
    repo.commit("one", when=1_700_000_000)
    path = write_tenants(
        tmp_path / "t.yaml", {"acme": [repo_entry("w", repo.path, version="2.0.0")]}
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(path))
    # These sweeps go through the library (run_sweep), which does not measure the
    # self-evaluation the quality gate waits on (the sweep step does: see
    # quality/test_quality_gate_e2e.py); the switch itself is what is tested here.
    monkeypatch.setenv("NEO_QUALITY_GATE", "false")
    tenant = load_tenants(path).tenants[0]
    ctx = RepoContext(tenant=tenant, repo=tenant.repos[0])
    server = {
        "NEO_EMBEDDING_PROVIDER": "openai_compatible",
        "NEO_EMBEDDING_BASE_URL": fault_server.base_url,
        "NEO_EMBEDDING_MODEL": "fake-embed",
        "NEO_EMBEDDING_DIMENSIONS": "64",
        "NEO_EMBEDDING_RECOVERY_MAX_WAIT_S": "0.2",
    }
    for name, value in server.items():
        monkeypatch.setenv(name, value)
    old = configured_generation(load_settings())
    assert sweep_once(ctx)["outcome"] == "complete"
    assert query()["embeddingGeneration"] == old

    # Configured: hashing (not swept yet). The old generation still serves; its server
    # stops answering.
    for name in server:
        monkeypatch.delenv(name)
    new = configured_generation(load_settings())
    fault_server.refuse()
    answer = query()
    assert answer["servingGeneration"] == old and answer["embeddingGeneration"] == new
    assert answer["results"] == []  # nothing built at the new generation yet, no crash
    [notice] = answer["notices"]
    assert notice["generation"] == old and "openai_compatible fake-embed" in notice["message"]
    assert sweep_once(ctx)["outcome"] == "complete"  # hashing builds; it serves from now on
    assert query()["embeddingGeneration"] == new and query()["notices"] == []

    # Configured: another model on the refusing server, never swept. The hashing
    # generation is complete and still embeds, so queries still answer from it.
    monkeypatch.setenv("NEO_EMBEDDING_PROVIDER", "openai_compatible")
    monkeypatch.setenv("NEO_EMBEDDING_BASE_URL", fault_server.base_url)
    monkeypatch.setenv("NEO_EMBEDDING_MODEL", "other-model")
    monkeypatch.setenv("NEO_EMBEDDING_DIMENSIONS", "64")
    assert query()["embeddingGeneration"] == new
    # Once the hashing generation is reclaimed only the refusing server's are left: a
    # clear error naming them, no traceback.
    with open_ledger(load_settings()) as ledger:
        from neo_assets.generations.records import mark_reclaimed

        mark_reclaimed(ledger, new, time.time())
    with pytest.raises(QueryUnavailable) as raised:
        query()
    assert {n["generation"] for n in raised.value.notices} >= {old}
    result = CliRunner().invoke(app, ["query", "render", "--tenant", "acme", "--json"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    doc = json.loads(result.stdout)
    assert "no embedding generation can embed this query" in doc["error"]
