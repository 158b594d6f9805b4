"""The band's rules over plain data (``core/band.py``): the admitted count under the
margin, the check against a provider's own limit and the notice when it is larger."""

import pytest

from neo_assets.core import codes
from neo_assets.core.band import (
    ADDED_TOKENS,
    SOURCE_CONFIGURED,
    SOURCE_SERVER,
    Band,
    BandOverProviderLimitError,
    ProviderLimit,
    check_band,
    headroom_notice,
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
