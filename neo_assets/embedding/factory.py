"""Settings -> one embedding provider. A wrong or missing setting fails here, by its name.
Provider modules are imported when their kind is asked for, so an optional extra is
needed only when used. Design: docs/design/embedding.md#providers"""

import importlib

from neo_assets.embedding.provider import EmbeddingProvider, ProviderArgs
from neo_assets.embedding.rules.provider_kinds import (
    PROVIDER_KINDS,
    SETTING_PROVIDER,
    provider_problem,
)

# Setting names as users write them (CONTRACT.md); errors quote these, not arguments.
SETTING_DIMENSIONS = "NEO_EMBEDDING_DIMENSIONS"
SETTING_TIMEOUT = "NEO_EMBEDDING_REQUEST_TIMEOUT_MS"


# The registry: each kind of provider_requirements.KINDS is the module of that name under
# neo_assets.embedding.providers, whose ``build(ProviderArgs)`` makes the provider.
PROVIDERS: dict[str, str] = {
    kind: f"neo_assets.embedding.providers.{kind}" for kind in PROVIDER_KINDS
}


def _text(value: str | None) -> str | None:
    return (value or "").strip() or None


def build_provider(
    kind: str,
    *,
    base_url: str | None,
    model: str | None,
    api_key: str | None,
    dimensions: int,
    request_timeout_ms: int,
    context_tokens: int | None = None,
) -> EmbeddingProvider:
    """The provider ``kind`` names, configured; ValueError naming the setting otherwise.
    What each needs is ``embedding.rules.provider_kinds``'s rule; ``sentence_transformers``
    raises MissingExtraError (an ImportError) naming the extra when it is not installed."""
    if not isinstance(dimensions, int) or dimensions <= 0:
        raise ValueError(f"{SETTING_DIMENSIONS} must be a positive integer, got {dimensions!r}")
    if not isinstance(request_timeout_ms, int) or request_timeout_ms <= 0:
        raise ValueError(
            f"{SETTING_TIMEOUT} must be a positive integer, got {request_timeout_ms!r}"
        )
    normalized = (kind or "").strip().lower().replace("-", "_")
    if normalized not in PROVIDERS:
        expected = ", ".join(PROVIDER_KINDS)
        raise ValueError(
            f"{SETTING_PROVIDER}={kind!r} is not a provider; expected one of {expected}"
        )
    problem = provider_problem(normalized, base_url=base_url, model=model, api_key=api_key)
    if problem is not None:
        raise ValueError(problem)
    module = importlib.import_module(PROVIDERS[normalized])
    return module.build(
        ProviderArgs(
            base_url=_text(base_url),
            model=_text(model),
            api_key=api_key or None,
            dimensions=dimensions,
            request_timeout_ms=request_timeout_ms,
            context_tokens=context_tokens,
        )
    )
