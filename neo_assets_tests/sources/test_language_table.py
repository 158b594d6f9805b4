"""A code language is one entry of sources/rules/code_languages.CODE_LANGUAGES plus its
grammar package: its endings, its grammar and its unit rules all come from that entry."""

import tomllib
from pathlib import Path

from neo_assets.sources.parsers.code_languages import SPECS
from neo_assets.sources.parsers.grammars import GRAMMARS, language_for
from neo_assets.sources.rules.code_languages import CODE_LANGUAGES
from neo_assets.sources.rules.languages import FAMILY_CODE, language_of

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_each_entry_decides_its_endings_its_grammar_and_its_units() -> None:
    assert set(GRAMMARS) == set(SPECS) == set(CODE_LANGUAGES)
    for name, spec in CODE_LANGUAGES.items():
        for suffix in spec.suffixes:
            got = language_of(f"src/file{suffix}")
            assert (got.language, got.family) == (name, FAMILY_CODE), suffix
        assert language_for(name) is not None  # the grammar loads
        assert spec.functions | spec.methods | spec.classes, name


def test_every_grammar_package_is_a_dependency() -> None:
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    names = {d.split(">")[0].split("=")[0].split("<")[0].strip() for d in deps}
    assert {spec.grammar.package for spec in CODE_LANGUAGES.values()} <= names
