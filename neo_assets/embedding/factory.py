"""Settings → one embedding provider. A wrong or missing setting fails here, by its name."""

from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.embedding.providers.hashing import HashingProvider

PROVIDER_KINDS = ("hashing", "openai_compatible", "ollama", "gemini", "sentence_transformers")

# Setting names as users write them (CONTRACT.md); errors quote these, not arguments.
SETTING_PROVIDER = "NEO_EMBEDDING_PROVIDER"
SETTING_BASE_URL = "NEO_EMBEDDING_BASE_URL"
SETTING_MODEL = "NEO_EMBEDDING_MODEL"
SETTING_API_KEY = "NEO_EMBEDDING_API_KEY"
SETTING_DIMENSIONS = "NEO_EMBEDDING_DIMENSIONS"
SETTING_TIMEOUT = "NEO_EMBEDDING_REQUEST_TIMEOUT_MS"


def _required(value: str | None, setting: str, kind: str) -> str:
    if value is None or not value.strip():
        raise ValueError(f"{setting} must be set when {SETTING_PROVIDER}={kind}")
    return value.strip()


def _http_url(value: str | None, kind: str) -> str:
    url = _required(value, SETTING_BASE_URL, kind)
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{SETTING_BASE_URL} must be an http(s) URL, got {url!r}")
    return url


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
    if normalized == "hashing":
        if model and model.strip():
            return HashingProvider(dimensions=dimensions, model=model.strip())
        return HashingProvider(dimensions=dimensions)
    if normalized == "openai_compatible":
        from neo_assets.embedding.providers.openai_compatible import (  # noqa: PLC0415
            OpenAICompatibleProvider,
        )

        return OpenAICompatibleProvider(
            base_url=_http_url(base_url, normalized),
            model=_required(model, SETTING_MODEL, normalized),
            api_key=(api_key or None),
            dimensions=dimensions,
            request_timeout_ms=request_timeout_ms,
        )
    if normalized == "ollama":
        from neo_assets.embedding.providers.ollama import OllamaProvider  # noqa: PLC0415

        return OllamaProvider(
            base_url=_http_url(base_url, normalized),
            model=_required(model, SETTING_MODEL, normalized),
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
            api_key=_required(api_key, SETTING_API_KEY, normalized),
            model=_required(model, SETTING_MODEL, normalized),
            base_url=_http_url(base_url or GEMINI_BASE_URL, normalized),
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
