"""The band: how many tokens one input may cost, and how they are counted. Resolved from the
settings, the model's files and the ledger's record, never the network, so every caller
computes the same generation. Design: docs/design/embedding.md#band"""

from neo_assets.config.settings import Settings
from neo_assets.embedding.rules.band import (
    SOURCE_CONFIGURED,
    SOURCE_DISCOVERED,
    SOURCE_SERVER,
    SOURCE_TOKENIZER,
    Band,
    Discovery,
    ProviderLimit,
    counting_tokenizer,
    discovered_limit,
)
from neo_assets.embedding.rules.provider_kinds import REMOTE_KINDS

_UNREAD = object()  # band_for reads the ledger's record itself


def configured_band(settings: Settings) -> Band:
    """The band the settings alone declare (no provider limit known)."""
    emb = settings.embedding
    return Band(
        limit_tokens=emb.context_tokens,
        safety=emb.admission_safety,
        source=SOURCE_CONFIGURED,
        chars_per_token=emb.resolved_chars_per_token,
    )


def band_for(settings: Settings, found: object = _UNREAD) -> Band:
    """The band in force, from the settings and ``found`` (the ledger's record of the
    provider's last contact, read here when not given); an explicit
    ``NEO_EMBEDDING_CONTEXT_TOKENS`` overrides, and caps the in-process model's own limit."""
    emb = settings.embedding
    band_set = "context_tokens" in emb.model_fields_set
    if emb.provider == "sentence_transformers":
        from neo_assets.embedding.providers import sentence_transformers as st  # noqa: PLC0415

        limit = st.static_input_limit(emb.model)
        if limit is not None:
            if band_set:
                limit = min(limit, emb.context_tokens)
            model = emb.model
            return Band(
                limit_tokens=limit,
                safety=1.0,
                source=SOURCE_TOKENIZER,
                chars_per_token=emb.resolved_chars_per_token,
                counter=lambda texts: st.count_tokens(model, texts),
            )
    if emb.provider not in REMOTE_KINDS:
        return configured_band(settings)
    if found is _UNREAD:
        found = recorded_for(settings)
    assert found is None or isinstance(found, Discovery)
    limit_tokens, discovered = discovered_limit(emb.context_tokens, band_set, found)
    tokenizer = counting_tokenizer(emb.tokenizer, found)
    if tokenizer is not None and emb.base_url:
        return server_band(settings, limit_tokens, tokenizer or None)
    # Characters per token: the set one, else what this provider's refusals taught.
    cpt = emb.resolved_chars_per_token
    if "chars_per_token" not in emb.model_fields_set and found and found.chars_per_token:
        cpt = found.chars_per_token
    return Band(
        limit_tokens=limit_tokens,
        safety=emb.admission_safety,
        source=SOURCE_DISCOVERED if discovered else SOURCE_CONFIGURED,
        chars_per_token=cpt,
    )


def recorded_for(settings: Settings) -> Discovery | None:
    """The ledger's record of the configured provider's last contact (no network)."""
    from neo_assets.store.provider_limits import recorded_discovery_at  # noqa: PLC0415

    emb = settings.embedding
    return recorded_discovery_at(
        settings.store.resolved_ledger_url, emb.provider, emb.base_url, emb.model
    )


def server_band(settings: Settings, limit_tokens: int, endpoint: str | None = None) -> Band:
    """``limit_tokens`` exactly, counted by the server's own tokenizer
    (``embedding/server_tokens.py``; ``endpoint``: the one discovery found, else it is
    found at first use): no margin, since nothing is estimated. The counter is built here
    but asks the server only when a text could be over the band."""
    from neo_assets.embedding.server_tokens import counter_for  # noqa: PLC0415

    emb = settings.embedding
    assert emb.base_url is not None
    counter = counter_for(
        emb.base_url,
        model=emb.model,
        band_tokens=limit_tokens,
        api_key=emb.api_key,
        timeout_s=emb.request_timeout_ms / 1000.0,
        wait_s=emb.loading_max_wait_s,
        endpoint=endpoint,
        refused_wait_s=emb.unreachable_wait_s,
    )
    return Band(
        limit_tokens=limit_tokens,
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
