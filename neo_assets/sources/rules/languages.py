"""Which language or format a path is, by its name (case-insensitive suffix, or a few whole
names such as ``Makefile``): its chunks' ``language`` and the family that decides the
reader. Pure."""

from dataclasses import dataclass

from neo_assets.sources.rules.code_languages import CODE_LANGUAGES

FAMILY_CODE = "code"
FAMILY_PYTHON = "python"
FAMILY_DOCS = "docs"
FAMILY_DATA = "data"
FAMILY_STYLE = "style"
FAMILY_TEXT = "text"


@dataclass(frozen=True)
class LanguageOf:
    language: str  # the chunk's ``language``: "go", "typescript", "markdown", "text", ...
    family: str  # FAMILY_*


_BY_SUFFIX: dict[str, LanguageOf] = {}


def _add(family: str, language: str, *suffixes: str) -> None:
    for suffix in suffixes:
        _BY_SUFFIX[suffix] = LanguageOf(language, family)


_add(FAMILY_PYTHON, "python", ".py", ".pyi")
for _name, _spec in CODE_LANGUAGES.items():
    _add(FAMILY_CODE, _name, *_spec.suffixes)
_add(FAMILY_DOCS, "markdown", ".md", ".markdown")
_add(FAMILY_DOCS, "rst", ".rst", ".rest")
_add(FAMILY_DOCS, "asciidoc", ".adoc", ".asciidoc", ".asc")
_add(FAMILY_DATA, "json", ".json", ".jsonc", ".json5")
_add(FAMILY_DATA, "yaml", ".yaml", ".yml")
_add(FAMILY_DATA, "toml", ".toml")
_add(FAMILY_STYLE, "css", ".css")
_add(FAMILY_STYLE, "scss", ".scss", ".less")

_BY_NAME: dict[str, LanguageOf] = {
    "rakefile": LanguageOf("ruby", FAMILY_CODE),
    "gemfile": LanguageOf("ruby", FAMILY_CODE),
    ".bashrc": LanguageOf("bash", FAMILY_CODE),
    ".bash_profile": LanguageOf("bash", FAMILY_CODE),
    ".zshrc": LanguageOf("bash", FAMILY_CODE),
    ".profile": LanguageOf("bash", FAMILY_CODE),
}

TEXT = LanguageOf("text", FAMILY_TEXT)


def language_of(source_path: str) -> LanguageOf:
    """The language and family of ``source_path``; TEXT for anything unknown."""
    base = source_path.rsplit("/", 1)[-1].lower()
    known = _BY_NAME.get(base)
    if known is not None:
        return known
    dot = base.rfind(".")
    if dot <= 0:
        return TEXT
    return _BY_SUFFIX.get(base[dot:], TEXT)


def known_languages() -> tuple[str, ...]:
    """Every ``language`` a path can be given (``language_of``), sorted."""
    named = {v.language for v in (*_BY_SUFFIX.values(), *_BY_NAME.values(), TEXT)}
    return tuple(sorted(named))
