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
refusals; a band under it is kept (it is the configured, stable one) and the server's
limit is named with the setting that would use it (``headroom_notice``). The band and
those rules are plain data and functions in ``core/band.py``.

The band in tokens is part of the embedding generation (``services/sweep/steps.py``), so
a provider whose limit changes re-offers what the old limit could not take. It is
resolved from the settings and the provider's static answer only, never from the
network, so the sweep, the due check and reconciliation compute the same generation.
"""

from neo_assets.config.settings import Settings
from neo_assets.core.band import (
    SOURCE_CONFIGURED,
    SOURCE_SERVER,
    SOURCE_TOKENIZER,
    Band,
    ProviderLimit,
)


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


async def provider_limit(provider: object, cancel_scope: object) -> ProviderLimit | None:
    """The provider's own answer about its input limit, None when it gives none."""
    discover = getattr(provider, "discover_limit", None)
    if not callable(discover):
        return None
    found = await discover(cancel_scope)
    return found if isinstance(found, ProviderLimit) and found.tokens > 0 else None
