"""The metadata stamped on every row. Stamps come from the partition's tenant and repo
and the declaration, never from chunk content (a chunk that imitates stamp keys stays
plain text in the document)."""

from typing import Any

# What the parser says about a chunk, beside the stamps: where it is and what it is.
CHUNK_META_KEYS = ("language", "startLine", "endLine", "qualifiedName", "parent")
# sha256 of the exact text the provider embedded for the row (neo_assets/embedding/rules/reuse.py):
# a missing chunk with the same input at the same generation copies the row's vector.
INPUT_DIGEST_KEY = "embeddingInputDigest"


def row_stamps(
    *,
    tenant_id: str,
    repo_slug: str,
    source_path: str,
    kind: str,
    name: str,
    parser_id: str,
    parser_version: str,
    tenant_config_version: int,
    ingested_at: float,
    revision: str,
    embedding_generation: str,
) -> dict[str, Any]:
    return {
        "tenantId": str(tenant_id),
        "repoSlug": str(repo_slug),
        "sourcePath": str(source_path),
        "kind": str(kind),
        "name": str(name),
        "parserId": str(parser_id),
        "parserVersion": str(parser_version),
        "tenantConfigVersion": int(tenant_config_version),
        "ingestedAt": float(ingested_at),
        "revision": str(revision),
        "embeddingGeneration": str(embedding_generation),
    }


def chunk_metadata(
    *,
    language: str | None,
    start_line: Any,
    end_line: Any,
    qualified_name: str | None,
    parent: str | None,
) -> dict[str, Any]:
    """What the parser knows of a chunk, as row metadata: every key on every row (Chroma
    metadata values cannot be None, so "none" is ``""``: a 1.x row's language and
    qualified name, a function's parent). Lines are 1-based and inclusive."""
    return {
        "language": str(language or ""),
        "startLine": int(start_line),
        "endLine": int(end_line),
        "qualifiedName": str(qualified_name or ""),
        "parent": str(parent or ""),
    }


def tenant_filter(tenant_id: str, repo_slug: str | None = None) -> dict[str, Any]:
    """A Chroma ``where`` that can only narrow: equality on validated stamp values."""
    if repo_slug is None:
        return {"tenantId": {"$eq": tenant_id}}
    return {"$and": [{"tenantId": {"$eq": tenant_id}}, {"repoSlug": {"$eq": repo_slug}}]}
