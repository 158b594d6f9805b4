"""Settings → one embedding provider. A wrong or missing setting fails here, by its name."""

from neo_assets.core.provider_requirements import SETTING_PROVIDER, provider_problem
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.embedding.providers.hashing import HashingProvider

PROVIDER_KINDS = ("hashing", "openai_compatible", "ollama", "gemini", "sentence_transformers")

# Setting names as users write them (CONTRACT.md); errors quote these, not arguments.
SETTING_DIMENSIONS = "NEO_EMBEDDING_DIMENSIONS"
SETTING_TIMEOUT = "NEO_EMBEDDING_REQUEST_TIMEOUT_MS"


def _text(value: str | None) -> str:
    return (value or "").strip()


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

    - ``hashing``: offline default; ``model`` optional (names the hashing scheme).
    - ``openai_compatible``: base URL and model required, key optional.
    - ``ollama``: base URL and model required; ``context_tokens`` is sent as ``num_ctx``.
    - ``gemini``: key and model required; base URL defaults to Google's endpoint.
    - ``sentence_transformers``: model optional (the bundled all-MiniLM-L6-v2, 384-d);
      raises MissingExtraError (an ImportError) naming the extra when not installed.
    """
    if not isinstance(dimensions, int) or dimensions <= 0:
        raise ValueError(f"{SETTING_DIMENSIONS} must be a positive integer, got {dimensions!r}")
    if not isinstance(request_timeout_ms, int) or request_timeout_ms <= 0:
        raise ValueError(
            f"{SETTING_TIMEOUT} must be a positive integer, got {request_timeout_ms!r}"
        )
    normalized = (kind or "").strip().lower().replace("-", "_")
    problem = provider_problem(normalized, base_url=base_url, model=model, api_key=api_key)
    if problem is not None:
        raise ValueError(problem)
    if normalized == "hashing":
        if model and model.strip():
            return HashingProvider(dimensions=dimensions, model=model.strip())
        return HashingProvider(dimensions=dimensions)
    if normalized == "openai_compatible":
        from neo_assets.embedding.providers.openai_compatible import (  # noqa: PLC0415
            OpenAICompatibleProvider,
        )

        return OpenAICompatibleProvider(
            base_url=_text(base_url),
            model=_text(model),
            api_key=(api_key or None),
            dimensions=dimensions,
            request_timeout_ms=request_timeout_ms,
        )
    if normalized == "ollama":
        from neo_assets.embedding.providers.ollama import OllamaProvider  # noqa: PLC0415

        return OllamaProvider(
            base_url=_text(base_url),
            model=_text(model),
            api_key=(api_key or None),
            dimensions=dimensions,
            request_timeout_ms=request_timeout_ms,
            num_ctx=context_tokens,
        )
    if normalized == "gemini":
        from neo_assets.embedding.providers.gemini import (  # noqa: PLC0415
            GEMINI_BASE_URL,
            GeminiProvider,
        )

        return GeminiProvider(
            api_key=_text(api_key),
            model=_text(model),
            base_url=_text(base_url) or GEMINI_BASE_URL,
            dimensions=dimensions,
            request_timeout_ms=request_timeout_ms,
        )
    if normalized == "sentence_transformers":
        from neo_assets.embedding.providers.sentence_transformers import (  # noqa: PLC0415
            SentenceTransformersProvider,
        )

        return SentenceTransformersProvider(dimensions=dimensions, model=model or None)
    expected = ", ".join(PROVIDER_KINDS)
    raise ValueError(f"{SETTING_PROVIDER}={kind!r} is not a provider; expected one of {expected}")
