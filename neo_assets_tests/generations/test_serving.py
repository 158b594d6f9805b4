"""The settings' generation equals the generation of the provider built from them, for
every spelling each provider accepts (the sweep digests the provider; the due check,
reconciliation and the status digest the settings)."""

import pytest

from neo_assets.config.settings import load_settings
from neo_assets.generations.serving import configured_generation, generation_for
from neo_assets.services.handles import build_provider
from neo_assets_tests.extras import require_sentence_transformers

CASES = [
    ("hashing", {}),
    ("hashing", {"NEO_EMBEDDING_MODEL": "neo-hashing-v1"}),
    ("sentence_transformers", {}),
    ("sentence_transformers", {"NEO_EMBEDDING_MODEL": "all-MiniLM-L6-v2"}),
    ("sentence_transformers", {"NEO_EMBEDDING_MODEL": "sentence-transformers/all-MiniLM-L6-v2"}),
    ("gemini", {"NEO_EMBEDDING_MODEL": "models/text-embedding-004", "NEO_EMBEDDING_API_KEY": "k"}),
    ("gemini", {"NEO_EMBEDDING_MODEL": "text-embedding-004", "NEO_EMBEDDING_API_KEY": "k"}),
    (
        "openai_compatible",
        {"NEO_EMBEDDING_MODEL": "m ", "NEO_EMBEDDING_BASE_URL": "http://127.0.0.1:9"},
    ),
    ("ollama", {"NEO_EMBEDDING_MODEL": "nomic", "NEO_EMBEDDING_BASE_URL": "http://127.0.0.1:9"}),
]


@pytest.mark.parametrize(("kind", "env"), CASES)
def test_settings_and_built_provider_agree(neo_home, monkeypatch, kind, env) -> None:
    if kind == "sentence_transformers":
        require_sentence_transformers(env.get("NEO_EMBEDDING_MODEL", "all-MiniLM-L6-v2"))
    monkeypatch.setenv("NEO_EMBEDDING_PROVIDER", kind)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    provider = build_provider(settings)
    assert generation_for(settings, provider.name, provider.model, provider.dimensions) == (
        configured_generation(settings)
    )


def test_spellings_of_one_model_share_the_configured_generation(neo_home, monkeypatch) -> None:
    digests = set()
    monkeypatch.setenv("NEO_EMBEDDING_PROVIDER", "gemini")
    monkeypatch.setenv("NEO_EMBEDDING_API_KEY", "k")  # gemini cannot be configured without one
    for model in ("models/text-embedding-004", "text-embedding-004"):
        monkeypatch.setenv("NEO_EMBEDDING_MODEL", model)
        digests.add(configured_generation(load_settings()))
    assert len(digests) == 1


def test_the_canary_reports_the_configured_generation(neo_home, monkeypatch) -> None:
    from neo_assets.health.canary import run_canary

    settings = load_settings()
    doc = run_canary(settings, force=True).to_doc()
    assert doc["healthy"] and doc["embeddingGeneration"] == configured_generation(settings)
