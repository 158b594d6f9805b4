"""The self-evaluation after a sweep with the bundled model, through a real Dagster sweep
run: the sweep closes its provider when its lane is done, and the quality step that follows
in the same step asks its questions through that provider. A provider that cannot be used
again after ``aclose`` (the sentence-transformers one shut its worker down for good) left
every bundled-model sweep without its ``retrieval_quality`` (a warning in the run's log,
nothing recorded), while the hashing embedder's sweeps had theirs."""

import asyncio
from pathlib import Path

import dagster as dg
import numpy as np
import pytest

from neo_assets.cli.launch import run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.providers.sentence_transformers import SentenceTransformersProvider
from neo_assets.generations.serving import configured_generation
from neo_assets.quality.records import latest_scores
from neo_assets.services.handles import open_ledger
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.extras import require_sentence_transformers
from neo_assets_tests.quality.test_quality_gate_e2e import TOPICS, history
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


def test_the_bundled_model_embeds_again_after_aclose_without_loading_twice() -> None:
    require_sentence_transformers()
    provider = SentenceTransformersProvider(dimensions=384)

    async def embed() -> np.ndarray:
        return await provider.embed(["split a header line"], CancelScope(), "test")

    first = asyncio.run(embed())
    model = provider._model  # noqa: SLF001 - the loaded model is what must not load twice
    asyncio.run(provider.aclose())
    again = asyncio.run(embed())
    assert np.allclose(first, again)
    assert provider._model is model  # noqa: SLF001
    asyncio.run(provider.aclose())


def test_a_bundled_model_sweep_records_its_self_evaluation(
    neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_sentence_transformers()
    repo = history(tmp_path)
    tenants_path = write_tenants(
        tmp_path / "tenants.yaml", {"acme": [repo_entry("tools", repo.path, version="2.0.0")]}
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants_path))
    monkeypatch.setenv("NEO_EMBEDDING_PROVIDER", "sentence_transformers")
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    try:
        settings = load_settings()
        [result] = run_sweeps(settings, load_tenants(tenants_path), instance)
        assert result["outcome"] == "complete", result
        with open_ledger(settings) as ledger:
            scores = latest_scores(ledger, "acme", ["tools"])
        generation = configured_generation(settings)
        assert ("tools", generation) in scores, scores
        score = scores[("tools", generation)]
        assert score.questions == len(TOPICS) and score.revision == repo.head()
        assert score.recall_at_10 >= 0.5, score  # the model reads the subjects' meaning
        [event] = instance.fetch_materializations(
            dg.AssetKey("retrieval_quality"), limit=10
        ).records
        md = event.asset_materialization.metadata
        assert md["mrr_at_10"].value == score.mrr_at_10 and md["generation"].value == generation
        warnings = [
            e.user_message
            for e in instance.all_logs(result["runId"])
            if "self-evaluation not made" in (e.user_message or "")
        ]
        assert not warnings, warnings
    finally:
        instance.dispose()
