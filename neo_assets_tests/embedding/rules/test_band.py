"""The band's rules over plain data (``embedding/rules/band.py``): the admitted count under the
margin, the check against a provider's own limit and the notice when it is larger; what a
contact's discovery replaces, and what size refusals teach."""

import pytest

from neo_assets.core import codes
from neo_assets.embedding.rules.band import (
    ADDED_TOKENS,
    SOURCE_CONFIGURED,
    SOURCE_SERVER,
    Band,
    BandOverProviderLimitError,
    Discovery,
    ProviderLimit,
    SizeRefusal,
    check_band,
    counting_tokenizer,
    discovered_limit,
    discovery_changed,
    headroom_notice,
    learn_from_refusals,
    token_bound,
)

LIMIT = ProviderLimit(512, "llama.cpp /props default_generation_settings.n_ctx")


def band(limit: int, safety: float = 1.0, source: str = SOURCE_SERVER) -> Band:
    return Band(limit_tokens=limit, safety=safety, source=source, chars_per_token=2.3)


def test_an_estimated_band_admits_under_its_margin_and_an_exact_one_its_limit() -> None:
    assert band(512, 0.9, SOURCE_CONFIGURED).tokens == 460
    assert band(512).tokens == 512
    assert band(512, 0.9, SOURCE_CONFIGURED).describe()["counted"] == "estimate"
    assert band(512).describe()["counted"] == "server"


def test_a_band_over_the_providers_limit_is_a_config_error_naming_the_value() -> None:
    with pytest.raises(BandOverProviderLimitError) as raised:
        check_band("openai_compatible", band(1024), LIMIT)
    assert raised.value.code == codes.KB_VECTOR_EMBED_BAND_OVER_PROVIDER_LIMIT
    assert "NEO_EMBEDDING_CONTEXT_TOKENS=512" in str(raised.value)
    check_band("openai_compatible", band(512), LIMIT)  # at the limit: fine
    check_band("openai_compatible", band(1024), None)  # nothing reported: fine


def test_a_provider_that_takes_more_than_the_band_is_named_with_the_setting() -> None:
    notice = headroom_notice(band(256), LIMIT)
    assert notice is not None and "NEO_EMBEDDING_CONTEXT_TOKENS=512" in notice
    assert headroom_notice(band(512), LIMIT) is None
    assert headroom_notice(band(256), None) is None


def test_the_token_bound_is_bytes_plus_the_added_tokens() -> None:
    assert token_bound("abc") == 3 + ADDED_TOKENS
    assert token_bound("é") == 2 + ADDED_TOKENS  # two UTF-8 bytes


# ------------------------------------------------------------------ discovery and refusals

LLAMA = Discovery(512, "llama.cpp /props", "llama.cpp")


def test_a_contact_that_finds_nothing_keeps_the_record_and_a_changed_limit_replaces_it() -> None:
    assert discovery_changed(None, LLAMA)
    assert not discovery_changed(LLAMA, None)
    assert not discovery_changed(LLAMA, Discovery(512, "again", "llama.cpp"))
    assert discovery_changed(LLAMA, Discovery(1024, "restarted", "llama.cpp"))
    assert discovery_changed(LLAMA, Discovery(512, "another server", None))
    # What refusals taught is kept while the server says the same.
    learned = Discovery(1024, "props", "llama.cpp", learned_limit=512)
    assert not discovery_changed(learned, Discovery(1024, "props", "llama.cpp"))


def test_the_set_band_overrides_the_discovered_limit_and_a_learned_limit_narrows_it() -> None:
    assert discovered_limit(8192, False, None) == (8192, False)
    assert discovered_limit(8192, False, LLAMA) == (512, True)
    assert discovered_limit(300, True, LLAMA) == (300, False)
    assert discovered_limit(8192, False, Discovery(None, "nothing", "tei")) == (8192, False)
    narrowed = Discovery(1024, "props", "llama.cpp", learned_limit=512)
    assert discovered_limit(8192, False, narrowed) == (512, True)


def test_auto_counts_with_the_servers_tokenizer_only_where_one_was_found() -> None:
    assert counting_tokenizer("auto", LLAMA) == "llama.cpp"
    assert counting_tokenizer("auto", None) is None
    assert counting_tokenizer("auto", Discovery(2048, "ollama", None)) is None
    assert counting_tokenizer("auto", Discovery(256, "st", "bundled")) is None
    assert counting_tokenizer("estimate", LLAMA) is None
    assert counting_tokenizer("server", LLAMA) == "llama.cpp"
    assert counting_tokenizer("server", None) == ""  # the counter finds its endpoint itself


def test_a_named_smaller_limit_is_learned_even_when_counted_exactly() -> None:
    found = Discovery(1024, "props", "llama.cpp")
    refused = [SizeRefusal(chars=2000, input_tokens=700, limit_tokens=512)]
    learned = learn_from_refusals(found, 1024, True, 2.3, refused)
    assert learned is not None and learned.effective_limit == 512
    assert learned.limit_tokens == 1024  # what the server said stays what it said


def test_counted_exactly_with_nothing_smaller_named_nothing_is_learned() -> None:
    refused = [SizeRefusal(chars=2000, input_tokens=700, limit_tokens=512)]
    assert learn_from_refusals(LLAMA, 512, True, 2.3, refused) is None
    assert learn_from_refusals(LLAMA, 512, False, 2.3, []) is None


def test_estimated_refusals_teach_the_ratio_they_showed_under_a_margin() -> None:
    # 1,057 characters the server counted as 741 tokens: 1.43 chars per token, x0.9.
    refused = [
        SizeRefusal(chars=1057, input_tokens=741, limit_tokens=512),
        SizeRefusal(chars=1200, input_tokens=None, limit_tokens=None),  # > 512 tokens
    ]
    learned = learn_from_refusals(LLAMA, 512, False, 2.3, refused)
    assert learned is not None
    assert learned.chars_per_token == round(1057 / 741 * 0.9, 3)
    assert (learned.limit_tokens, learned.tokenizer) == (512, "llama.cpp")
    # A ratio no smaller than the one in force teaches nothing (bounded: it only falls).
    assert learn_from_refusals(LLAMA, 512, False, 1.0, refused) is None
    # Nothing discovered before: the ratio is still learned, the limit stays configured.
    alone = learn_from_refusals(None, 512, False, 2.3, refused[1:])
    assert alone is not None and alone.limit_tokens is None
    assert alone.chars_per_token == round(1200 / 513 * 0.9, 3)
