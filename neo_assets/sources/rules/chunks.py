"""The chunk: one unit of parsed content with its identity, and the rules that make a
file's chunk list well-formed (ids computed from the identity tuple, duplicates
collapsed)."""

from collections.abc import Iterable
from dataclasses import dataclass, field

from neo_assets.core.ids.chunk_ids import chunk_id


@dataclass(frozen=True)
class Chunk:
    """A chunk as stored. ``chunk_id`` is computed: the contract's chunk id over the
    identity fields only, not the line range (lines move when code above moves; identity
    is the content's, not its position) and not the metadata after it (``language``,
    ``qualified_name``, ``parent``: what an agent reads about the chunk, derived from the
    same input)."""

    tenant_id: str
    repo_slug: str
    kind: str
    name: str
    content: str
    source_path: str
    parser_id: str
    parser_version: str
    start_line: int
    end_line: int
    language: str = ""  # "python", "go", "markdown", ... ("" from parser 1.x)
    qualified_name: str = ""  # the unit's name qualified by module/package ("" from 1.x)
    parent: str | None = None  # the enclosing unit's name: a method's class, ...
    chunk_id: str = field(init=False)

    def __post_init__(self) -> None:
        identity = (self.tenant_id, self.repo_slug, self.kind, self.name, self.content)
        the_id = chunk_id(*identity, self.source_path, self.parser_id, self.parser_version)
        object.__setattr__(self, "chunk_id", the_id)


def dedupe_chunks(chunks: Iterable[Chunk]) -> list[Chunk]:
    """Keep the first chunk of each id, in input order. Two chunks share an id only when
    every identity field is equal, so the survivor is interchangeable with the dropped
    one except for its (earlier) line range."""
    seen: set[str] = set()
    out: list[Chunk] = []
    for chunk in chunks:
        if chunk.chunk_id not in seen:
            seen.add(chunk.chunk_id)
            out.append(chunk)
    return out


@dataclass(frozen=True, slots=True)
class DeclaredChunk:
    """One chunk of a repo's declared generation, the one form a chunk takes from the parse to
    the lane. A chunk kept from the recorded generation has no text (``has_text``) until its
    file is parsed again; its fields read as the parser's rows, so the stored metadata is the
    same whichever way the chunk came."""

    chunk_id: str
    source_path: str
    kind: str
    name: str
    blob: str | None = None
    content: str | None = None
    start_line: int | None = None
    end_line: int | None = None
    language: str | None = None
    qualified_name: str | None = None
    parent: str | None = None
    fallback_reason: str = ""

    @property
    def has_text(self) -> bool:
        return self.content is not None
