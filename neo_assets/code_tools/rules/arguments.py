"""The tools' arguments: an ``Arg`` per argument of a ``ToolSpec``, which both validates
a request (``check_args``: the same rules for HTTP, MCP and the CLI, no coercion: ``"5"``
is not an integer) and publishes its JSON schema (``input_schema``, ``portable``)."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from neo_assets.code_tools.rules.limits import MAX_NAME_CHARS
from neo_assets.core import codes
from neo_assets.query.rules.request import QueryInputError, glob_matches_everything


@dataclass(frozen=True)
class Arg:
    name: str
    type: str  # "string" | "integer" | "boolean"
    description: str
    required: bool = False
    default: Any = None
    minimum: int | None = None
    maximum: int | None = None
    enum: tuple[str, ...] | None = None
    max_length: int = MAX_NAME_CHARS
    examples: tuple[Any, ...] = ()


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    args: tuple[Arg, ...]
    output: dict[str, Any]

    def arg(self, name: str) -> Arg | None:
        return next((a for a in self.args if a.name == name), None)


def input_schema(spec: ToolSpec) -> dict[str, Any]:
    """The tool's JSON schema (draft 2020-12), every argument described."""
    props: dict[str, Any] = {}
    for a in spec.args:
        p: dict[str, Any] = {"type": a.type, "description": a.description}
        if a.type == "string":
            p |= {"minLength": 1, "maxLength": a.max_length}
        enum = None if a.enum is None else list(a.enum)
        bounds = {"minimum": a.minimum, "maximum": a.maximum, "enum": enum, "default": a.default}
        p |= {k: v for k, v in bounds.items() if v is not None}
        props[a.name] = p | ({"examples": list(a.examples)} if a.examples else {})
    return {
        "type": "object",
        "properties": props,
        "required": [a.name for a in spec.args if a.required],
        "additionalProperties": False,
    }


def _bad(name: str, message: str) -> QueryInputError:
    return QueryInputError(codes.QUERY_INVALID, f"{name}: {message}", name)


def _check(a: Arg, value: Any) -> Any:
    if a.type == "integer":
        if type(value) is not int or not (a.minimum or 0) <= value <= (a.maximum or value):
            raise _bad(
                a.name,
                f"must be an integer from {a.minimum} to {a.maximum} (got {str(value)[:32]})",
            )
    elif a.type == "boolean":
        if type(value) is not bool:
            raise _bad(a.name, "must be true or false")
    else:
        if type(value) is not str or not value.strip():
            raise _bad(
                a.name, "must be a non-empty string" + ("" if a.required else " (or left out)")
            )
        if len(value) > a.max_length or "\x00" in value:
            raise _bad(a.name, f"must be at most {a.max_length} characters, without NUL")
        if a.enum is not None and value not in a.enum:
            raise _bad(a.name, f"must be one of {', '.join(a.enum)} (got {value[:40]!r})")
    return value


def check_args(spec: ToolSpec, body: Any) -> dict[str, Any]:
    """``parse_args`` for any declared tool (``spec``)."""
    tool = spec.name
    if not isinstance(body, Mapping):
        raise QueryInputError(codes.QUERY_INVALID, "the arguments must be a JSON object", None)
    names = [a.name for a in spec.args]
    for key in body:
        if key not in names:
            raise QueryInputError(
                codes.QUERY_UNKNOWN_FIELD,
                f"unknown field {str(key)[:64]!r}; {tool} takes {', '.join(names)}",
                str(key)[:64],
            )
    out: dict[str, Any] = {}
    for a in spec.args:
        value = body.get(a.name)
        if value is None:
            if a.required:
                raise _bad(a.name, f"is required ({a.description})")
            out[a.name] = a.default
            continue
        out[a.name] = _check(a, value)
    for glob_field in ("path", "path_glob"):
        glob = out.get(glob_field)
        if tool != "read_file" and glob is not None and glob_matches_everything(glob):
            raise _bad(glob_field, f"the glob {glob!r} matches every path; leave it out instead")
    if tool == "read_file" and out["end_line"] is not None and out["end_line"] < out["start_line"]:
        raise _bad("end_line", f"must be at least start_line ({out['start_line']})")
    return out


def portable(schema: Any) -> Any:
    """``schema`` with every nullable ``type`` array (``["string", "null"]``) spelled as
    ``anyOf`` branches of one type each, which clients that map tool schemas onto a
    single-type dialect accept (the MCP Inspector's ``--strict`` lint warns otherwise)."""
    if isinstance(schema, list):
        return [portable(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: portable(v) for k, v in schema.items()}
    types = out.get("type")
    if not isinstance(types, list):
        return out
    top = {k: out.pop(k) for k in ("description", "default", "examples") if k in out}
    out.pop("type")
    if "enum" in out:
        out["enum"] = [v for v in out["enum"] if v is not None]
    branches = [{"type": t, **out} if t != "null" else {"type": "null"} for t in types]
    return {"anyOf": branches, **top}
