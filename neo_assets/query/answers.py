"""What the query library answers with: a served row as a result document (its secrets
redacted on the way out), and the errors a caller can cause (403, 404, a refused
question)."""

from typing import Any

from neo_assets.core import codes
from neo_assets.embedding.failures import EmbedFailure
from neo_assets.query.rules.request import QueryInputError
from neo_assets.secrets.rules import redact


def forbidden(repo: str) -> QueryInputError:
    return QueryInputError(
        codes.AUTH_FORBIDDEN,
        f"repo {repo[:64]!r} is not readable with this token: ask for one of your tenant's "
        "repos (GET /v1/repos lists them)",
        "repo",
        status=403,
    )


def embed_refused(exc: EmbedFailure) -> QueryInputError:
    """A provider's refusal of the question is the asker's to fix (400); any other
    failure is the service's (503), named by its class, never a traceback."""
    if exc.code == codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL:
        return QueryInputError(
            codes.QUERY_INVALID,
            f"query: the embedding provider refused it ({exc.detail}); shorten the question",
            "query",
        )
    return QueryInputError(
        codes.QUERY_UNAVAILABLE,
        f"the embedding provider could not embed the question ({exc.code}); retry later",
        None,
        status=503,
    )


def not_found(chunk_id: str) -> QueryInputError:
    # The same answer for an unknown id and another tenant's: nothing is revealed.
    return QueryInputError(
        codes.QUERY_NOT_FOUND, f"no chunk {chunk_id} among your repos", "id", status=404
    )


def result_doc(row: dict[str, Any], score: float, similarity: float | None, lexical: float):
    md = row["metadata"]
    # A row stored before secrets were fenced (or under older rules) is never served with
    # its secret: each line that holds one is redacted on the way out.
    document = row["document"]
    if document:
        document = redact(document, md.get("sourcePath"))[0]
    return {
        "id": row["id"],
        "score": round(float(score), 6),
        "similarity": None if similarity is None else round(float(similarity), 6),
        "lexical": lexical,
        "document": document,
        "metadata": md,
        "repo": md.get("repoSlug"),
        "path": md.get("sourcePath"),
        "startLine": md.get("startLine"),
        "endLine": md.get("endLine"),
        "kind": md.get("kind"),
        "name": md.get("name"),
        "qualifiedName": md.get("qualifiedName"),
        "language": md.get("language"),
        "revision": md.get("revision"),
    }
