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


# Why a provider that never answered counts as not there (core/embedding.first_contact).
UNREACHABLE_REFUSED = "refused"
UNREACHABLE_UNRESOLVED = "unresolved"
UNREACHABLE_WRONG_PATH = "wrong-path"

_START_HINTS = {
    "ollama": "is Ollama running? Start it with `ollama serve`",
    "openai_compatible": "is the embeddings server running there? Start it",
}


def unreachable_message(kind: str, url: str | None, why: str, waited_s: float) -> str:
    """One line for a provider that is not there: the URL, what happened, the setting and
    the likely fix (never the key)."""
    where = url or "its endpoint"
    if why == UNREACHABLE_WRONG_PATH:
        return (
            f"the {kind} provider at {where} answers 404 to its embeddings request: "
            f"{SETTING_BASE_URL} names the server's base URL, without the API path "
            "(e.g. http://127.0.0.1:8080, not .../v1/embeddings)"
        )
    if why == UNREACHABLE_UNRESOLVED:
        return (
            f"the {kind} provider's host in {where} cannot be reached (the name does not "
            f"resolve or the connection fails): check {SETTING_BASE_URL}"
        )
    hint = _START_HINTS.get(kind, "is the provider running there? Start it")
    return (
        f"nothing accepts connections at {where} (the {kind} provider, {SETTING_BASE_URL}; "
        f"waited {waited_s:.0f} s): {hint}, or set {SETTING_BASE_URL} to where it listens"
    )


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
