"""What the tenants file's readers report: a ``ConfigProblem`` (where, what, line), the
``TenantsConfigError`` listing them all, and the bounded words messages show values in."""

import datetime
import re
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neo_assets.core.codes import CONFIG_INVALID
from neo_assets.tenants.rules import MAX_PROBLEMS_SHOWN


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One thing wrong with the file: where (``location``, e.g.
    ``tenants['acme'].repos[0].slug``; ``(file)`` for the file as a whole), what, and the
    1-based line when known."""

    location: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = self.location if self.line is None else f"{self.location} (line {self.line})"
        return f"{where}: {self.message}"


class TenantsConfigError(Exception):
    """The tenants file is not usable; ``problems`` lists every reason at once."""

    code = CONFIG_INVALID

    def __init__(self, path: Path, problems: Sequence[ConfigProblem]) -> None:
        self.path = path
        self.problems = list(problems)
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        lines = [f"invalid tenants file {path} ({count} {noun}; nothing was run):"]
        lines += [f"  - {problem}" for problem in self.problems[:MAX_PROBLEMS_SHOWN]]
        if count > MAX_PROBLEMS_SHOWN:
            lines.append(f"  ... and {count - MAX_PROBLEMS_SHOWN} more")
        super().__init__("\n".join(lines))


class _ShortRepr(reprlib.Repr):
    """Bounded repr: a hostile value (alias bombs, huge strings) prints in a few dozen
    characters, never by walking its whole structure."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = 70
        self.maxother = 70
        self.maxlist = 4
        self.maxdict = 4
        self.maxtuple = 4
        self.maxset = 4
        self.maxlevel = 2

    def repr_MarkedDict(self, value: dict[Any, Any], level: int) -> str:
        return self.repr_dict(value, level)

    def repr_MarkedList(self, value: list[Any], level: int) -> str:
        return self.repr_list(value, level)


short_repr = _ShortRepr().repr


def type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, list | tuple):
        return "list"
    return type(value).__name__


def string_hint(value: object) -> str:
    """Why YAML produced a non-string where text was meant, and the fix."""
    if isinstance(value, bool):
        return " (YAML reads unquoted yes/no/on/off/true/false as booleans: put it in quotes)"
    if isinstance(value, int | float | datetime.date):
        return " (YAML reads an unquoted number or date as a non-string: put it in quotes)"
    return ""


def found_value(value: object) -> str:
    return f"{short_repr(value)} ({type_name(value)})"


def key_label(key: object) -> str:
    if isinstance(key, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,40}", key, re.ASCII):
        return key
    return short_repr(key)
