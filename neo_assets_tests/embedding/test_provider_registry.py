"""A provider kind is its module in embedding/providers/ plus its row in
embedding/rules/provider_kinds.KINDS: nothing else names it."""

import ast
import importlib
from pathlib import Path

from neo_assets.core import codes
from neo_assets.embedding import providers
from neo_assets.embedding.factory import PROVIDERS
from neo_assets.embedding.rules.provider_kinds import (
    KINDS,
    PROVIDER_KINDS,
    REMOTE_KINDS,
    timeout_code,
)

PROVIDERS_DIR = Path(providers.__file__).parent
# Plumbing shared by the providers, not providers themselves.
SHARED = {"__init__", "http", "hash_features"}


def test_every_row_is_a_module_with_build_and_every_module_a_row() -> None:
    modules = {p.stem for p in PROVIDERS_DIR.glob("*.py")} - SHARED
    assert modules == set(PROVIDER_KINDS) == set(PROVIDERS)
    for kind in PROVIDER_KINDS:
        assert callable(getattr(importlib.import_module(PROVIDERS[kind]), "build", None)), kind


def test_a_provider_imports_the_shared_plumbing_never_a_sibling() -> None:
    for path in PROVIDERS_DIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
        }
        siblings = {
            m.rsplit(".", 1)[1] for m in imported if m.startswith("neo_assets.embedding.providers.")
        }
        assert siblings <= SHARED, f"{path.name} imports {sorted(siblings - SHARED)}"


def test_the_rows_decide_remote_and_timeout_codes() -> None:
    assert REMOTE_KINDS == ("openai_compatible", "ollama")
    assert timeout_code("openai_compatible") == codes.OPENAI_COMPATIBLE_REQUEST_TIMEOUT
    assert timeout_code("gemini") == codes.GEMINI_REQUEST_TIMEOUT
    assert timeout_code("ollama") == timeout_code("not-a-kind") == codes.PROVIDER_TIMEOUT
    assert {k.timeout_code for k in KINDS} <= codes.PROVIDER_DEADLINE_CODES
