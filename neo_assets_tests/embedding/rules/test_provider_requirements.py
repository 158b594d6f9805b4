"""What each provider needs from the settings (one rule for the settings and the factory)."""

import pytest

from neo_assets.embedding.rules.provider_kinds import REQUIRED, provider_problem


@pytest.mark.parametrize("kind", ["hashing", "sentence_transformers"])
def test_local_providers_need_nothing(kind: str) -> None:
    assert provider_problem(kind, base_url=None, model=None, api_key=None) is None


@pytest.mark.parametrize("kind", sorted(REQUIRED))
def test_each_required_setting_is_named_when_blank(kind: str) -> None:
    full = {"base_url": "http://127.0.0.1:9", "model": "m", "api_key": "sk-secret"}
    assert provider_problem(kind, **full) is None
    for setting in REQUIRED[kind]:
        field = setting.removeprefix("NEO_EMBEDDING_").lower()
        for blank in (None, "  "):
            problem = provider_problem(kind, **{**full, field: blank})
            assert problem == f"{setting} must be set when NEO_EMBEDDING_PROVIDER={kind}"


def test_a_base_url_must_be_http_and_the_key_is_never_quoted() -> None:
    problem = provider_problem(
        "openai_compatible", base_url="localhost:8080", model="m", api_key="sk-secret"
    )
    assert problem == "NEO_EMBEDDING_BASE_URL must be an http(s) URL, got 'localhost:8080'"
    # gemini's base URL has a default: blank is fine, a wrong one is not.
    assert provider_problem("gemini", base_url=None, model="m", api_key="k") is None
    assert "http(s)" in str(provider_problem("gemini", base_url="ftp://x", model="m", api_key="k"))
