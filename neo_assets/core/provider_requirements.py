"""What each embedding provider needs from the settings, as one rule for both the settings
(refused at load, before anything runs) and the factory (refused at construction)."""

SETTING_PROVIDER = "NEO_EMBEDDING_PROVIDER"
SETTING_BASE_URL = "NEO_EMBEDDING_BASE_URL"
SETTING_MODEL = "NEO_EMBEDDING_MODEL"
SETTING_API_KEY = "NEO_EMBEDDING_API_KEY"

# The settings each provider cannot run without (gemini's base URL has a default).
REQUIRED: dict[str, tuple[str, ...]] = {
    "openai_compatible": (SETTING_BASE_URL, SETTING_MODEL),
    "ollama": (SETTING_BASE_URL, SETTING_MODEL),
    "gemini": (SETTING_API_KEY, SETTING_MODEL),
}


def _blank(value: str | None) -> bool:
    return value is None or not value.strip()


def provider_problem(
    kind: str, *, base_url: str | None, model: str | None, api_key: str | None
) -> str | None:
    """Why ``kind`` cannot be built from these values, naming the setting to set; None
    when it can. Never quotes the key."""
    values = {SETTING_BASE_URL: base_url, SETTING_MODEL: model, SETTING_API_KEY: api_key}
    for setting in REQUIRED.get(kind, ()):
        if _blank(values[setting]):
            return f"{setting} must be set when {SETTING_PROVIDER}={kind}"
    if base_url and base_url.strip() and not base_url.strip().startswith(("http://", "https://")):
        return f"{SETTING_BASE_URL} must be an http(s) URL, got {base_url.strip()!r}"
    return None
