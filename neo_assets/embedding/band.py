"""The band: how many tokens one input may cost, and how they are counted.

The limit comes from the provider where it can say (``input_limit()``: the in-process
model's ``max_seq_length``, read from its files without loading it); its tokens are
counted as the model counts them where it can (``count_tokens``: the model's own
tokenizer). Otherwise the limit is the configured ``NEO_EMBEDDING_CONTEXT_TOKENS`` and
tokens are estimated from characters (``NEO_EMBEDDING_CHARS_PER_TOKEN``, calibrated on
real code: docs/performance.md) under the ``NEO_EMBEDDING_ADMISSION_SAFETY`` margin.

A remote server that reports its own limit is asked once per sweep, before the first
request (``provider_limit``: llama.cpp's ``/props``, Ollama's ``/api/show``). A band over
what the server takes is a configuration error naming ``NEO_EMBEDDING_CONTEXT_TOKENS``
and the server's answer (``check_band``), at first contact, instead of a sweep of size
refusals; a band under it is kept (it is the configured, stable one).

The band in tokens is part of the embedding generation (``services/sweep/steps.py``), so
a provider whose limit changes re-offers what the old limit could not take. It is
resolved from the settings and the provider's static answer only, never from the
network, so the sweep, the due check and reconciliation compute the same generation.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from neo_assets.config.settings import Settings
from neo_assets.core import codes
from neo_assets.core.embedding import estimate_tokens

SOURCE_TOKENIZER = "tokenizer"  # the model's own limit, counted by its own tokenizer
SOURCE_CONFIGURED = "configured"  # NEO_EMBEDDING_CONTEXT_TOKENS, estimated from chars
SOURCE_SERVER = "server-tokenizer"  # NEO_EMBEDDING_CONTEXT_TOKENS, counted by the server

TokenCounter = Callable[[Sequence[str]], list[int]]


@dataclass(frozen=True)
class Band:
    """The per-input limit in force for one provider."""

    limit_tokens: int  # the provider's true limit per input (special tokens included)
    safety: float  # 1.0 when the model's own tokenizer counts; the margin otherwise
    source: str
    chars_per_token: float
    counter: TokenCounter | None = None  # exact counts, or None: estimated from chars

    @property
    def tokens(self) -> int:
        """The largest count admitted: the limit, under the margin when estimated."""
        return max(1, math.floor(self.limit_tokens * self.safety))

    @property
    def exact(self) -> bool:
        return self.counter is not None

    def count(self, texts: Sequence[str]) -> list[int]:
        """Each text's tokens: the model's count, else the character estimate. (A server's
        counter answers a text too short to be over the band with its bound, unasked.)"""
        if self.counter is not None:
            return list(self.counter(texts))
        return [estimate_tokens(t, self.chars_per_token) for t in texts]

    def fits(self, text: str) -> bool:
        return self.count([text])[0] <= self.tokens

    def describe(self) -> dict[str, object]:
        """What receipts and the summary say about the band (no text, no callables)."""
        return {
            "bandTokens": self.tokens,
            "limitTokens": self.limit_tokens,
            "source": self.source,
            "counted": {SOURCE_TOKENIZER: "tokenizer", SOURCE_SERVER: "server"}.get(
                self.source, "estimate"
            ),
            "charsPerToken": self.chars_per_token,
        }


def configured_band(settings: Settings) -> Band:
    """The band the settings alone declare (no provider limit known)."""
    emb = settings.embedding
    return Band(
        limit_tokens=emb.context_tokens,
        safety=emb.admission_safety,
        source=SOURCE_CONFIGURED,
        chars_per_token=emb.resolved_chars_per_token,
    )


def band_for(settings: Settings) -> Band:
    """The band in force (module docstring), from the settings and the provider's static
    answer, never the network: the in-process model's ``max_seq_length`` from its files,
    counted by its own tokenizer; else ``NEO_EMBEDDING_CONTEXT_TOKENS`` under the margin.
    An explicitly set ``NEO_EMBEDDING_CONTEXT_TOKENS`` caps a provider's own limit."""
    emb = settings.embedding
    if emb.provider == "sentence_transformers":
        from neo_assets.embedding.providers import sentence_transformers as st  # noqa: PLC0415

        limit = st.static_input_limit(emb.model)
        if limit is not None:
            if "context_tokens" in emb.model_fields_set:
                limit = min(limit, emb.context_tokens)
            model = emb.model
            return Band(
                limit_tokens=limit,
                safety=1.0,
                source=SOURCE_TOKENIZER,
                chars_per_token=emb.resolved_chars_per_token,
                counter=lambda texts: st.count_tokens(model, texts),
            )
    if emb.tokenizer == "server" and emb.base_url:
        return server_band(settings)
    return configured_band(settings)


def server_band(settings: Settings) -> Band:
    """``NEO_EMBEDDING_CONTEXT_TOKENS`` exactly, counted by the server's own tokenizer
    (``embedding/server_tokens.py``): no margin, since nothing is estimated. The counter
    is built here but asks the server only when a text could be over the band."""
    from neo_assets.embedding.server_tokens import counter_for  # noqa: PLC0415

    emb = settings.embedding
    assert emb.base_url is not None
    counter = counter_for(
        emb.base_url,
        emb.model,
        emb.context_tokens,
        emb.api_key,
        emb.request_timeout_ms / 1000.0,
        emb.loading_max_wait_s,
    )
    return Band(
        limit_tokens=emb.context_tokens,
        safety=1.0,
        source=SOURCE_SERVER,
        chars_per_token=emb.resolved_chars_per_token,
        counter=counter,
    )


SETTING_CONTEXT_TOKENS = "NEO_EMBEDDING_CONTEXT_TOKENS"


@dataclass(frozen=True)
class ProviderLimit:
    """What a server says one input may cost, and where it said so."""

    tokens: int
    source: str  # e.g. "llama.cpp /props default_generation_settings.n_ctx"


class BandOverProviderLimitError(ValueError):
    """The band assumes more tokens per input than the provider takes."""

    code = codes.KB_VECTOR_EMBED_BAND_OVER_PROVIDER_LIMIT

    def __init__(self, provider: str, band: Band, limit: ProviderLimit) -> None:
        self.limit = limit
        super().__init__(
            f"{SETTING_CONTEXT_TOKENS}={band.limit_tokens} but the {provider} provider takes "
            f"{limit.tokens} tokens per input ({limit.source}): set "
            f"{SETTING_CONTEXT_TOKENS}={limit.tokens} (or raise the server's limit)"
        )


async def provider_limit(provider: object, cancel_scope: object) -> ProviderLimit | None:
    """The provider's own answer about its input limit, None when it gives none."""
    discover = getattr(provider, "discover_limit", None)
    if not callable(discover):
        return None
    found = await discover(cancel_scope)
    return found if isinstance(found, ProviderLimit) and found.tokens > 0 else None


def headroom_notice(band: Band, limit: ProviderLimit | None) -> str | None:
    """What to say when the server takes more per input than the band assumes: the band
    stays (it is in the generation, computed without the network), and raising
    ``NEO_EMBEDDING_CONTEXT_TOKENS`` to the server's limit makes a new generation that
    re-offers what the narrower band split or fenced."""
    if limit is None or limit.tokens <= band.limit_tokens:
        return None
    return (
        f"the server takes {limit.tokens} tokens per input ({limit.source}) but the band is "
        f"{band.limit_tokens}: set {SETTING_CONTEXT_TOKENS}={limit.tokens} to use it (a new "
        "generation: what the band split or fenced is offered again)"
    )


def check_band(provider_name: str, band: Band, limit: ProviderLimit | None) -> None:
    """Raise ``BandOverProviderLimitError`` when ``band`` assumes more than ``limit``."""
    if limit is not None and band.limit_tokens > limit.tokens:
        raise BandOverProviderLimitError(provider_name, band, limit)
