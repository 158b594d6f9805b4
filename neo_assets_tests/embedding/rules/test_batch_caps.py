"""Which batch cap a lane starts at, from the one remembered for its provider."""

from neo_assets.embedding.rules.batch_caps import (
    RECHECK_S,
    RememberedCap,
    provider_cap_key,
    starting_cap,
)


def test_a_fresh_remembered_cap_is_started_at() -> None:
    assert starting_cap(RememberedCap(32, learned_at=1_000.0), now=1_000.0 + 60) == 32


def test_nothing_remembered_starts_at_the_configured_size() -> None:
    assert starting_cap(None, now=5.0) is None
    assert starting_cap(RememberedCap(0, learned_at=5.0), now=5.0) is None


def test_a_cap_a_day_old_is_re_checked_at_the_configured_size() -> None:
    learned = RememberedCap(32, learned_at=1_000.0)
    assert starting_cap(learned, now=1_000.0 + RECHECK_S - 1) == 32
    assert starting_cap(learned, now=1_000.0 + RECHECK_S) is None
    assert starting_cap(learned, now=1_000.0 + 10, recheck_s=5) is None


def test_the_provider_key_is_kind_url_and_model_a_trailing_slash_aside() -> None:
    key = provider_cap_key("openai_compatible", "http://127.0.0.1:8080/", "bge")
    assert key == provider_cap_key("openai_compatible", "http://127.0.0.1:8080", "bge")
    assert key != provider_cap_key("ollama", "http://127.0.0.1:8080", "bge")
    assert key != provider_cap_key("openai_compatible", "http://127.0.0.1:8081", "bge")
    assert key != provider_cap_key("openai_compatible", "http://127.0.0.1:8080", "e5")
