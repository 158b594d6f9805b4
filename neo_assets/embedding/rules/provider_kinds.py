"""The embedding provider kinds, one row each (``KINDS``): what a kind needs from the
settings, whether it is remote, its deadline's code, the fix to suggest when nothing
answers. A new provider is its module in ``embedding/providers/`` plus its row here."""

from dataclasses import dataclass

from neo_assets.core import codes

SETTING_PROVIDER = "NEO_EMBEDDING_PROVIDER"
SETTING_BASE_URL = "NEO_EMBEDDING_BASE_URL"
SETTING_MODEL = "NEO_EMBEDDING_MODEL"
SETTING_API_KEY = "NEO_EMBEDDING_API_KEY"

_START_IT = "is the provider running there? Start it"


@dataclass(frozen=True)
class ProviderKind:
    name: str  # NEO_EMBEDDING_PROVIDER's value and the module under embedding/providers/
    needs: tuple[str, ...] = ()  # the settings it cannot run without
    remote: bool = False  # an HTTP server at NEO_EMBEDDING_BASE_URL whose limit is asked
    timeout_code: str = codes.PROVIDER_TIMEOUT  # what its own request deadline fails with
    start_hint: str = _START_IT  # the likely fix when nothing accepts connections


KINDS: tuple[ProviderKind, ...] = (
    ProviderKind("hashing"),
    ProviderKind(
        "openai_compatible",
        needs=(SETTING_BASE_URL, SETTING_MODEL),
        remote=True,
        timeout_code=codes.OPENAI_COMPATIBLE_REQUEST_TIMEOUT,
        start_hint="is the embeddings server running there? Start it",
    ),
    # Ollama keeps the generic PROVIDER_TIMEOUT (the compatibility contract inherited).
    ProviderKind(
        "ollama",
        needs=(SETTING_BASE_URL, SETTING_MODEL),
        remote=True,
        start_hint="is Ollama running? Start it with `ollama serve`",
    ),
    # Gemini's base URL has a default.
    ProviderKind(
        "gemini", needs=(SETTING_API_KEY, SETTING_MODEL), timeout_code=codes.GEMINI_REQUEST_TIMEOUT
    ),
    ProviderKind("sentence_transformers"),
)
BY_KIND = {k.name: k for k in KINDS}
PROVIDER_KINDS = tuple(BY_KIND)
REMOTE_KINDS = tuple(k.name for k in KINDS if k.remote)
REQUIRED: dict[str, tuple[str, ...]] = {k.name: k.needs for k in KINDS if k.needs}


def timeout_code(kind: str) -> str:
    """The code a request of ``kind`` that hit its own deadline fails with."""
    known = BY_KIND.get(kind)
    return known.timeout_code if known else codes.PROVIDER_TIMEOUT


# Why a provider that never answered counts as not there
# (embedding.rules.lane_evidence.first_contact).
UNREACHABLE_REFUSED = "refused"
UNREACHABLE_UNRESOLVED = "unresolved"
UNREACHABLE_WRONG_PATH = "wrong-path"


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
    hint = BY_KIND[kind].start_hint if kind in BY_KIND else _START_IT
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
