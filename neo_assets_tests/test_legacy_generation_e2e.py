"""A knowledge base made before generations lived apart (one collection, a ledger at
0007) keeps working after the upgrade: migration 0008 records its complete repos at
their generation in the legacy collection, queries answer from it, an unchanged
configuration re-embeds nothing, and a model change migrates by the same switch."""

import asyncio
from pathlib import Path

import pytest
import sqlalchemy as sa

from neo_assets.config.settings import load_settings
from neo_assets.generations.records import generation_records, repo_generations
from neo_assets.generations.serving import configured_generation
from neo_assets.query.one_shot import run_query
from neo_assets.services.handles import open_ledger, open_store
from neo_assets.sweep.context import RepoContext
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import sweep_once
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


def query() -> dict:
    settings = load_settings()
    with open_ledger(settings) as ledger, open_store(settings) as store:
        return asyncio.run(
            run_query(
                settings,
                store,
                ledger,
                "render",
                tenant="acme",
                repo=None,
                k=20,
            )
        )


def as_before_generations(neo_home: Path) -> None:
    """What a ledger made before this change looked like: at 0007, no generation tables."""
    engine = sa.create_engine(f"sqlite:///{neo_home / 'ledger.sqlite'}")
    with engine.begin() as conn:
        conn.execute(sa.text("drop table embedding_generations"))
        conn.execute(sa.text("drop table repo_generations"))
        conn.execute(sa.text("update alembic_version set version_num = '0007'"))
    engine.dispose()


def test_a_pre_generation_knowledge_base_keeps_answering_and_migrates_by_the_switch(
    neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
    first = sweep_once(ctx)
    assert first["outcome"] == "complete"
    legacy = first["embeddingGeneration"]
    as_before_generations(neo_home)

    settings = load_settings()
    with open_ledger(settings) as ledger:  # migrates to 0008: the legacy repo adopted
        [record] = generation_records(ledger).values()
        assert record.generation == legacy and record.collection_name is None
        [at] = repo_generations(ledger, "acme")
        assert at.generation == legacy and at.complete
    answered = query()
    assert answered["embeddingGeneration"] == legacy and answered["results"]
    assert {h["metadata"]["embeddingGeneration"] for h in answered["results"]} == {legacy}
    # Unchanged configuration: the legacy collection is this generation's; nothing sent.
    again = sweep_once(ctx)
    assert again["counts"]["alreadyPresent"] == again["counts"]["chunks"]
    assert again["counts"].get("offered", 0) == 0

    # A model change builds beside the legacy collection and switches when complete.
    monkeypatch.setenv("NEO_EMBEDDING_DIMENSIONS", "128")
    new = configured_generation(load_settings())
    assert new != legacy
    switched = sweep_once(ctx)
    assert switched["outcome"] == "complete" and switched["embeddingGeneration"] == new
    after = query()
    assert after["embeddingGeneration"] == new
    assert {h["metadata"]["embeddingGeneration"] for h in after["results"]} == {new}
    with open_ledger(load_settings()) as ledger:
        records = generation_records(ledger)
    assert records[new].collection_name == f"neo-knowledge-base-{new}"
    assert records[legacy].collection_name is None
    # Switching back before reclamation is instant: the legacy generation is complete.
    monkeypatch.delenv("NEO_EMBEDDING_DIMENSIONS")
    back = query()
    assert back["embeddingGeneration"] == legacy
