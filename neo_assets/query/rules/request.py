"""What a search request may ask, checked before anything is read.

Pure: a decoded JSON object in, a ``SearchRequest`` out, or a ``QueryInputError`` naming
the field and the fix. Every surface (HTTP, MCP, CLI) builds its request here.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from neo_assets.core import codes
from neo_assets.query.rules.filters import (  # noqa: F401 (glob_matches_everything re-exported)
    FILTER_NAMES,
    glob_matches_everything,
    refusal,
)

MAX_QUERY_CHARS = 4000
MAX_K = 100
DEFAULT_K = 10
MAX_FILTER_CHARS = 256
FIELDS = ("query", "k", "repo", *FILTER_NAMES, "expand")


class QueryInputError(ValueError):
    """A user-caused problem with a request: ``code``, the ``field`` at fault, a message
    that names the fix."""

    def __init__(
        self, code: str, message: str, field: str | None = None, status: int = 400
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.status = status  # the HTTP status a service answers with

    def as_json(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "field": self.field}}


@dataclass(frozen=True)
class SearchRequest:
    query: str
    k: int = DEFAULT_K
    repo: str | None = None
    # name -> wanted value, for the filters of ``query.rules.filters`` a request names
    filters: Mapping[str, str] = field(default_factory=dict)
    expand: bool = False

    def wants(self, name: str) -> str | None:
        return self.filters.get(name)


def _bad(field: str, message: str) -> QueryInputError:
    return QueryInputError(codes.QUERY_INVALID, f"{field}: {message}", field)


def _filter(body: Mapping[str, Any], field: str) -> str | None:
    value = body.get(field)
    if value is None:
        return None
    if type(value) is not str or not value.strip():
        raise _bad(field, "must be a non-empty string (or left out)")
    if len(value) > MAX_FILTER_CHARS or "\x00" in value:
        raise _bad(field, f"must be at most {MAX_FILTER_CHARS} characters, without NUL")
    return value


def parse_search(body: Any) -> SearchRequest:
    """The request in ``body`` (a decoded JSON object), or QueryInputError."""
    if not isinstance(body, Mapping):
        raise QueryInputError(
            codes.QUERY_INVALID, 'the body must be a JSON object: {"query": ...}', None
        )
    for key in body:
        if key not in FIELDS:
            raise QueryInputError(
                codes.QUERY_UNKNOWN_FIELD,
                f"unknown field {str(key)[:64]!r}; the fields are {', '.join(FIELDS)}",
                str(key)[:64],
            )
    query = body.get("query")
    if type(query) is not str or not query.strip():
        raise _bad("query", "must be a non-empty string")
    if len(query) > MAX_QUERY_CHARS:
        raise _bad("query", f"is {len(query)} characters; at most {MAX_QUERY_CHARS} are read")
    if "\x00" in query:
        raise _bad("query", "must not contain NUL")
    k = body.get("k", DEFAULT_K)
    if type(k) is not int or not 1 <= k <= MAX_K:
        raise _bad("k", f"must be an integer from 1 to {MAX_K} (got {str(k)[:32]})")
    expand = body.get("expand", False)
    if type(expand) is not bool:
        raise _bad("expand", "must be true or false")
    filters: dict[str, str] = {}
    for name in FILTER_NAMES:
        value = _filter(body, name)
        if value is not None:
            if (why := refusal(name, value)) is not None:
                raise _bad(name, why)
            filters[name] = value
    repo = _filter(body, "repo")
    return SearchRequest(query=query, k=k, repo=repo, filters=filters, expand=expand)


CHUNK_ID = re.compile(r"[0-9a-f]{64}", re.ASCII)


def parse_chunk_id(value: Any, field: str = "id") -> str:
    if type(value) is not str or CHUNK_ID.fullmatch(value) is None:
        raise _bad(field, "must be a chunk id: 64 lowercase hex characters")
    return value
