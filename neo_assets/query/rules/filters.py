"""The search filters, one declaration each: the request parser, MCP's schema, the CLI's
options and the served-row test (``facet_values``, ``kept``) all read it. Adding a filter
is adding one ``QueryFilter`` to ``FILTERS``."""

import fnmatch
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from neo_assets.sources.rules.chunk_kinds import ALL_CHUNK_KINDS
from neo_assets.sources.rules.languages import known_languages

# A glob made only of these matches every path: it narrows nothing, so it is refused.
_WILDCARD_ONLY = frozenset("*?/")


def glob_matches_everything(glob: str) -> bool:
    return set(glob) <= _WILDCARD_ONLY


def _narrowing_glob(glob: str) -> str | None:
    if glob_matches_everything(glob):
        return f"the glob {glob!r} matches every path; leave path out instead"
    return None


def _anything(_value: str) -> str | None:
    return None


@dataclass(frozen=True)
class QueryFilter:
    """``name`` is the request field, the MCP argument and the CLI option (``--name``);
    ``stamp`` the row metadata it reads; ``matches(row_value, wanted)`` decides;
    ``values`` is the closed set a request may name (empty: free text); ``refuse``
    returns why a value is refused (or None)."""

    name: str
    stamp: str
    description: str
    matches: Callable[[str, str], bool] = operator.eq
    values: tuple[str, ...] = ()
    refuse: Callable[[str], str | None] = _anything
    example: str = ""


FILTERS: tuple[QueryFilter, ...] = (
    QueryFilter(
        "path",
        "sourcePath",
        "Only chunks whose source path matches this glob (src/**/*.py; * also crosses folders).",
        matches=fnmatch.fnmatchcase,
        refuse=_narrowing_glob,
        example="src/*.py",
    ),
    QueryFilter(
        "language",
        "language",
        "Only chunks in this language.",
        values=known_languages(),
        example="python",
    ),
    QueryFilter(
        "kind",
        "kind",
        "Only chunks of this kind.",
        values=ALL_CHUNK_KINDS,
        example="function",
    ),
    QueryFilter(
        "unit",
        "qualifiedName",
        "Only chunks of units whose qualified name matches this glob (Ky.* for a class's "
        "members, *.retry for every retry).",
        matches=fnmatch.fnmatchcase,
        example="Ky.*",
    ),
)
FILTER_NAMES = tuple(f.name for f in FILTERS)
BY_NAME = {f.name: f for f in FILTERS}


def refusal(name: str, value: str) -> str | None:
    """Why ``value`` is not a value of filter ``name`` (None when it is)."""
    declared = BY_NAME[name]
    if declared.values and value not in declared.values:
        return f"{value[:64]!r} is not one of {', '.join(declared.values)}"
    return declared.refuse(value)


def facet_values(metadata: Mapping[str, object]) -> tuple[str, ...]:
    """A row's value of every filter, in ``FILTERS`` order (what a served row keeps)."""
    return tuple(str(metadata.get(f.stamp) or "") for f in FILTERS)


def kept(values: tuple[str, ...], wanted: Mapping[str, str]) -> bool:
    """True when a row with these ``facet_values`` passes every filter in ``wanted``."""
    return all(
        f.matches(value, wanted[f.name])
        for f, value in zip(FILTERS, values, strict=True)
        if f.name in wanted
    )
