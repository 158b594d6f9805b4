"""The tree-sitter grammars parser 2.x reads code with: one pip package per language.

``check_grammars()`` imports every grammar and loads it into tree-sitter; a sweep calls
it up front so a missing or incompatible package is one clear error naming what to
install, not a surprise in the middle of a repo. ``language_for(name)`` is the loaded
grammar (cached per process).
"""

import functools
import importlib
from dataclasses import dataclass

import tree_sitter


@dataclass(frozen=True)
class Grammar:
    package: str  # the pip name
    module: str  # the import name
    function: str  # the module's function returning the language pointer


GRAMMARS: dict[str, Grammar] = {
    "javascript": Grammar("tree-sitter-javascript", "tree_sitter_javascript", "language"),
    "typescript": Grammar(
        "tree-sitter-typescript", "tree_sitter_typescript", "language_typescript"
    ),
    "tsx": Grammar("tree-sitter-typescript", "tree_sitter_typescript", "language_tsx"),
    "go": Grammar("tree-sitter-go", "tree_sitter_go", "language"),
    "rust": Grammar("tree-sitter-rust", "tree_sitter_rust", "language"),
    "java": Grammar("tree-sitter-java", "tree_sitter_java", "language"),
    "c": Grammar("tree-sitter-c", "tree_sitter_c", "language"),
    "cpp": Grammar("tree-sitter-cpp", "tree_sitter_cpp", "language"),
    "csharp": Grammar("tree-sitter-c-sharp", "tree_sitter_c_sharp", "language"),
    "ruby": Grammar("tree-sitter-ruby", "tree_sitter_ruby", "language"),
    "php": Grammar("tree-sitter-php", "tree_sitter_php", "language_php"),
    "bash": Grammar("tree-sitter-bash", "tree_sitter_bash", "language"),
}


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
