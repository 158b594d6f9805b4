"""A pydantic ``ValidationError`` of the tenants models (tenants/models.py) as the file's
``ConfigProblem``s: an error's ``loc`` gives the place users read (``tenants['acme']
.repos['w'].parser.id``), the YAML loader's marks its line, the model its words; the
problems are listed in the order of the model's ``PHASES``."""

import difflib
from typing import Any

from pydantic import ValidationError

from neo_assets.tenants.models import Strict
from neo_assets.tenants.problems import ConfigProblem, found_value, key_label, string_hint
from neo_assets.tenants.yaml_marks import item_line, key_line

_KEY_ERRORS = ("extra_forbidden", "invalid_key")


def problems_of(
    error: ValidationError, model: type[Strict], raw: Any, location: str, line: int | None
) -> list[ConfigProblem]:
    """Every error of validating ``raw`` (the YAML as read, marks and all) with
    ``model``; ``location`` and ``line`` are the mapping's own."""
    ordered = [_problem(model, raw, err, location, line) for err in error.errors(include_url=False)]
    return [problem for _, problem in sorted(ordered, key=lambda pair: pair[0])]


def _join(location: str, part: object) -> str:
    if isinstance(part, int):
        return f"{location}[{part}]"
    return f"{location}.{part}" if location else str(part)


def _problem(
    model: type[Strict], raw: Any, err: Any, location: str, line: int | None
) -> tuple[list[int], ConfigProblem]:
    loc: tuple[Any, ...] = err["loc"]
    kind, value = err["type"], err["input"]
    order: list[int] = []
    # Into a nested model: its own errors, or its input when that is not a mapping.
    while loc and loc[0] in model.NESTED and (len(loc) > 1 or kind == "model_type"):
        order.append(model.PHASES.index(loc[0]))
        location, line = _join(location, loc[0]), key_line(raw, loc[0])
        model, raw, loc = model.NESTED[loc[0]], raw[loc[0]], loc[1:]
    if not loc:  # the model's input itself: not a mapping
        return order, ConfigProblem(location, model.not_a_mapping(value), line)
    if kind in _KEY_ERRORS:
        key = value if kind == "invalid_key" else loc[0]
        order += [model.PHASES.index("extra"), list(raw).index(key)]
        return order, ConfigProblem(
            _join(location, key_label(key)), _unknown_key(model, key), key_line(raw, key)
        )
    field = loc[0]
    if kind == "missing":
        order += [model.PHASES.index("missing"), list(model.model_fields).index(field)]
        return order, ConfigProblem(
            _join(location, field), _missing(model, raw, field), key_line(raw, field)
        )
    order += [model.PHASES.index(kind if kind in model.PHASES else field), *loc[1:]]
    place = _join(location, field)
    for part in loc[1:]:  # a list's item
        place = _join(place, part)
    line = key_line(raw, field) if len(loc) == 1 else item_line(raw[field], loc[1])
    return order, ConfigProblem(place, _message(model, field, err), line)


def _message(model: type[Strict], field: str, err: Any) -> str:
    kind, value, context = err["type"], err["input"], err.get("ctx") or {}
    if "message" in context:  # a check of the models' own (models.problem)
        return str(context["message"])
    if kind == "string_type":
        what, allowed = model.WORDS[field]
        found = f"{found_value(value)}{string_hint(value)}"
        return f"{what} must be a string; found {found}; allowed: {allowed}"
    if (field, kind) in model.MESSAGES:
        return model.MESSAGES[field, kind](value)
    return f"{err['msg']}; found {found_value(value)}"  # a check no message was written for


def _unknown_key(model: type[Strict], key: object) -> str:
    allowed = tuple(model.model_fields)
    hint = ""
    if isinstance(key, str):
        close = difflib.get_close_matches(key.strip().lower(), allowed, n=1, cutoff=0.6)
        if close:
            hint = f"; did you mean {close[0]!r}?"
    return (
        f"unknown key in {model.WHAT}; found key {found_value(key)}; allowed keys: "
        f"{', '.join(allowed)}{hint}"
    )


def _missing(model: type[Strict], raw: Any, key: str) -> str:
    found = f"no {key!r} key" if key not in raw else "an empty value (null)"
    return (
        f"missing required key {key!r} in {model.WHAT}; found {found}; allowed keys: "
        f"{', '.join(model.model_fields)}"
    )
