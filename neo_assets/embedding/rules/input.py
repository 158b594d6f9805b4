"""The text sent to the embedding provider for a chunk (not the stored document).

The origin knowledge base embeds a unit with a first line saying what it is, so a
question that names a class or a method finds the unit even when its body does not
repeat those words. Format ``header-v2`` (in force):

    method Collection.doSort
    <the chunk's content>

for chunks of parser ``neo-code`` 2.x (kind and in-file name); a ``text`` window or a
``module`` remainder, whose name is its line range or its path, is embedded bare. No path
is in the input, so a renamed, moved or copied file's chunks are the same inputs as
before and copy their vectors (neo_assets/embedding/rules/reuse.py) instead of being sent again.
``header-v1`` said ``method Collection.doSort in src/collection/Base.mjs`` (qualified
name and path): recall@5 on the 48-question retrieval bench was 87.5 % with it and
85.4 % with the path left out (docs/performance.md), one question of 48, against a
re-embed of every renamed file. Chunks of parser 1.x are embedded bare, as they always
were: 1.x is kept byte for byte.

One format is in force for the whole knowledge base: ``embedding_input_format()`` is the
single place it is read, and its id is part of the embedding generation digest
(``core/generations.generation_digest``, which the sweep, the due check,
reconciliation and the status all use), so changing the format is a new generation,
built beside the old one, never a silent mix of inputs under one generation.
The rule already tells 1.x from 2.x by the chunk's declared parser version, which is in
every chunk id, so one id can never be embedded two ways under one format.
"""

from neo_assets.sources.rules.parser_versions import GENERATION_UNITS, parser_generation

FORMAT_PLAIN = "plain"  # every chunk's content, bare
FORMAT_HEADER_V1 = "header-v1"  # 2.x chunks: "<kind> <qualified name> in <path>" first
# 2.x chunks: "<kind> <qualified name>" first, no path: the same content at another path
# (a rename, a move, a copy) is the same input, so its vector is copied, never re-sent.
FORMAT_HEADER_V2 = "header-v2"
INPUT_FORMATS = frozenset({FORMAT_PLAIN, FORMAT_HEADER_V1, FORMAT_HEADER_V2})

EMBEDDING_INPUT_FORMAT = FORMAT_HEADER_V2

KIND_TEXT = "text"
# Kinds whose name is derived from the path (a module) or is a line range (a window).
PATH_NAMED_KINDS = frozenset({KIND_TEXT, "module"})


def embedding_input_format() -> str:
    """The input format in force (its id goes into the embedding generation)."""
    return EMBEDDING_INPUT_FORMAT


def embedding_header(kind: str, name: str, qualified_name: str, source_path: str) -> str:
    if kind == KIND_TEXT:
        return f"{kind} in {source_path}"
    return f"{kind} {qualified_name or name} in {source_path}"


def embedding_input(
    content: str,
    *,
    kind: str,
    name: str,
    qualified_name: str | None,
    source_path: str,
    parser_version: str,
    input_format: str | None = None,
) -> str:
    """What the provider embeds for this chunk under ``input_format`` (the one in force
    when None)."""
    fmt = embedding_input_format() if input_format is None else input_format
    if fmt not in INPUT_FORMATS:
        raise ValueError(f"unknown embedding input format {fmt!r}")
    if fmt == FORMAT_PLAIN or parser_generation(parser_version) != GENERATION_UNITS:
        return content
    if fmt == FORMAT_HEADER_V2:
        if kind in PATH_NAMED_KINDS:
            return content  # its name is its path or its line range: nothing path-free to say
        return f"{kind} {name}\n{content}"
    return embedding_header(kind, name, qualified_name or "", source_path) + "\n" + content
