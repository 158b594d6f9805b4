"""The tree-sitter grammars parser 2.x reads code with: one pip package per language.
``check_grammars()`` loads every one up front, so a missing package is one clear error
naming what to install, not a surprise in the middle of a repo."""

import functools
import importlib

import tree_sitter

from neo_assets.sources.rules.code_languages import CODE_LANGUAGES, Grammar

# Every code language's grammar (sources/rules/code_languages.py holds the table).
GRAMMARS: dict[str, Grammar] = {name: spec.grammar for name, spec in CODE_LANGUAGES.items()}


class GrammarUnavailable(RuntimeError):
    """A grammar package is missing or does not load: ``package`` is what to install."""

    def __init__(self, language: str, package: str, why: str) -> None:
        super().__init__(
            f"the tree-sitter grammar for {language} does not load ({why}); "
            f"install it: pip install {package}"
        )
        self.language = language
        self.package = package


@functools.cache
def language_for(name: str) -> tree_sitter.Language:
    """The loaded grammar of ``name`` (a key of GRAMMARS); GrammarUnavailable when its
    package is missing or built for a tree-sitter ABI this tree-sitter cannot read."""
    grammar = GRAMMARS[name]
    try:
        module = importlib.import_module(grammar.module)
    except ImportError as exc:
        raise GrammarUnavailable(name, grammar.package, f"import {grammar.module}: {exc}") from exc
    try:
        return tree_sitter.Language(getattr(module, grammar.function)())
    except (AttributeError, TypeError, ValueError) as exc:
        raise GrammarUnavailable(name, grammar.package, f"{type(exc).__name__}: {exc}") from exc


def check_grammars() -> dict[str, str]:
    """Load every grammar; raise GrammarUnavailable for the first that does not load
    (its message names the pip package). Returns {language: pip package}."""
    for name in GRAMMARS:
        language_for(name)
    return {name: g.package for name, g in GRAMMARS.items()}
