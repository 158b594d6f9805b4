"""The text sent to the embedding provider for a chunk (not the stored document).

The origin knowledge base embeds a unit with a first line saying what and where it is, so
a question that names a class, a method or a file finds the unit even when its body does
not repeat those words. Format ``header-v1``:

    method Collection.doSort in src/collection/Base.mjs
    <the chunk's content>

for chunks of parser ``neo-code`` 2.x (kind, qualified name — the name when there is
none — and path; a ``text`` window says only ``text in <path>``, its name being just its
line range). Chunks of parser 1.x are embedded bare, as they always were: 1.x is kept
byte for byte, and its chunks have no qualified name to put in a header.

One format is in force for the whole knowledge base: ``embedding_input_format()`` is the
single place it is read, and its id is part of the embedding generation digest
(``core/generations.generation_digest``, which the sweep, the due check,
reconciliation and the status all use), so changing the format is a new generation:
every repo is due again and its rows are re-embedded, never a silent mix of inputs under
one generation.
The rule already tells 1.x from 2.x by the chunk's declared parser version, which is in
every chunk id, so one id can never be embedded two ways under one format.
"""

from neo_assets.core.sources.parser_versions import GENERATION_UNITS, parser_generation

FORMAT_PLAIN = "plain"  # every chunk's content, bare
FORMAT_HEADER_V1 = "header-v1"  # 2.x chunks: "<kind> <qualified name> in <path>" first
INPUT_FORMATS = frozenset({FORMAT_PLAIN, FORMAT_HEADER_V1})

EMBEDDING_INPUT_FORMAT = FORMAT_HEADER_V1

KIND_TEXT = "text"


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
    return embedding_header(kind, name, qualified_name or "", source_path) + "\n" + content
