"""Tests that need an optional extra skip with the reason where it is missing; CI installs
every extra and sets NEO_REQUIRE_EXTRAS, which turns such a skip into a failure."""

import os

import pytest

from neo_assets.embedding.providers.sentence_transformers import extra_missing_reason


def require_sentence_transformers(model: str | None = None) -> None:
    """Skip (or, under NEO_REQUIRE_EXTRAS, fail) when the sentence-transformers extra (and
    the bundled model, for its aliases) cannot be imported here."""
    reason = extra_missing_reason(model)
    if reason is None:
        return
    if os.environ.get("NEO_REQUIRE_EXTRAS"):
        pytest.fail(f"{reason} (NEO_REQUIRE_EXTRAS is set: the extra must be installed)")
    pytest.skip(f"sentence-transformers extra not installed: {reason}")
