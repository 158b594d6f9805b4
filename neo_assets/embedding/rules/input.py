"""The text sent to the embedding provider for a chunk (not the stored document), in the one
format in force (``embedding_input_format()``), whose id is in the generation digest.
Design: docs/design/embedding.md#input"""

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
