"""The declarations of the search tools an MCP client sees (search_code, get_chunk,
related_chunks, list_repos): every argument described, with its range or allowed values,
and each tool's output schema, in plain text. Declared with the code tools' ``Arg`` /
``ToolSpec`` so both kinds of tool publish their schemas the same way."""

from typing import Any

from neo_assets.code_tools.rules.arguments import Arg, ToolSpec
from neo_assets.query.rules.filters import FILTERS
from neo_assets.query.rules.request import DEFAULT_K, MAX_FILTER_CHARS, MAX_K, MAX_QUERY_CHARS

MAX_RELATED = 50
DEFAULT_RELATED = 10

_HIT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "The chunk id (64 hex); get_chunk reads it."},
        "score": {"type": "number", "description": "The fused rank score (higher is better)."},
        "similarity": {"type": ["number", "null"]},
        "lexical": {"type": ["number", "null"]},
        "document": {"type": "string", "description": "The chunk's text."},
        "metadata": {"type": "object", "description": "The row's stamps."},
        "repo": {"type": ["string", "null"]},
        "path": {"type": ["string", "null"]},
        "startLine": {"type": ["integer", "null"]},
        "endLine": {"type": ["integer", "null"]},
        "kind": {"type": ["string", "null"]},
        "name": {"type": ["string", "null"]},
        "qualifiedName": {"type": ["string", "null"]},
        "language": {"type": ["string", "null"]},
        "revision": {"type": ["string", "null"]},
    },
    "required": ["id", "document", "metadata"],
}

_CHUNK_ID = Arg(
    "id",
    "string",
    "The chunk id (64 lowercase hex characters) a search result gave.",
    required=True,
    max_length=64,
)

SEARCH_TOOLS: dict[str, ToolSpec] = {
    t.name: t
    for t in (
        ToolSpec(
            "search_code",
            "Find code chunks (functions, methods, classes, doc sections) of your repos by "
            "meaning and by exact identifiers. Each result has its repo, path, line range "
            "and text; read more around it with read_file.",
            (
                Arg(
                    "query",
                    "string",
                    "What to look for: words, an identifier, or both.",
                    required=True,
                    max_length=MAX_QUERY_CHARS,
                    examples=("retry with backoff", "calculateDelay"),
                ),
                Arg(
                    "k",
                    "integer",
                    "How many results.",
                    default=DEFAULT_K,
                    minimum=1,
                    maximum=MAX_K,
                ),
                Arg(
                    "repo",
                    "string",
                    "Only this repo (a slug that list_repos names).",
                    max_length=MAX_FILTER_CHARS,
                ),
                *(
                    Arg(
                        f.name,
                        "string",
                        f.description,
                        enum=f.values or None,
                        max_length=MAX_FILTER_CHARS,
                        examples=(f.example,) if f.example else (),
                    )
                    for f in FILTERS
                ),
                Arg(
                    "expand",
                    "boolean",
                    "Add each result's linked chunks (similar code, files changed together) "
                    "under neighbours.",
                    default=False,
                ),
            ),
            {
                "type": "object",
                "properties": {
                    "results": {
                        "type": "array",
                        "items": {
                            **_HIT,
                            "properties": {
                                **_HIT["properties"],
                                "behind": {"type": ["boolean", "null"]},
                                "head": {"type": ["string", "null"]},
                                "neighbours": {"type": "array", "items": _HIT},
                            },
                        },
                    },
                    "notices": {
                        "type": "array",
                        "description": "Generations that could not embed the query.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "code": {"type": "string", "description": "Why, as a stable code."},
                                "generation": {
                                    "type": "string",
                                    "description": "The generation skipped.",
                                },
                                "message": {
                                    "type": "string",
                                    "description": "What failed, for a person.",
                                },
                            },
                            "required": ["code", "generation", "message"],
                        },
                    },
                },
                "required": ["results"],
            },
        ),
        ToolSpec(
            "get_chunk",
            "Read one chunk by its id: its text, path, line range and stamps.",
            (_CHUNK_ID,),
            _HIT,
        ),
        ToolSpec(
            "related_chunks",
            "The chunks linked to one chunk: similar code and files changed together.",
            (
                _CHUNK_ID,
                Arg(
                    "limit",
                    "integer",
                    "At most this many linked chunks.",
                    default=DEFAULT_RELATED,
                    minimum=1,
                    maximum=MAX_RELATED,
                ),
            ),
            {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "neighbours": {"type": "array", "items": _HIT},
                },
                "required": ["id", "neighbours"],
            },
        ),
        ToolSpec(
            "list_repos",
            "The repos your token may read, with their sweep state and freshness: the "
            "revision each is indexed at (lastIngestedRev; the one every tool answers from), "
            "whether its declared head has moved on since (behind: true or false, null for a "
            "plain directory), that head and since when.",
            (),
            {
                "type": "object",
                "properties": {
                    "tenantId": {"type": "string"},
                    "repos": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "repoSlug": {"type": "string"},
                                "outcome": {"type": ["string", "null"]},
                                "lastIngestedRev": {"type": ["string", "null"]},
                                "embeddingGeneration": {"type": ["string", "null"]},
                                "servedRows": {"type": "integer"},
                                "behind": {"type": ["boolean", "null"]},
                                "head": {"type": ["string", "null"]},
                            },
                            "required": ["repoSlug"],
                        },
                    },
                },
                "required": ["tenantId", "repos"],
            },
        ),
    )
}
