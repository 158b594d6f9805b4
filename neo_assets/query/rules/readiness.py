"""Whether the store holds what the ledger says was swept (pure): a repo swept complete with
declared chunks whose rows the store does not serve means a missing or emptied store, and
an empty answer would be a lie."""

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class RepoHolding:
    """What the ledger records of one repo and what the store serves of it."""

    repo_slug: str
    ingested_revision: str | None  # the ledger's checkpoint; None: never swept complete
    declared_chunks: int
    served_rows: int


def missing_from_store(holdings: Iterable[RepoHolding]) -> list[RepoHolding]:
    """The repos swept complete with chunks of which the store serves nothing."""
    return [
        h
        for h in holdings
        if h.ingested_revision is not None and h.declared_chunks > 0 and h.served_rows == 0
    ]


def missing_store_message(tenant_id: str, missing: list[RepoHolding], store: str) -> str:
    """The line a caller and an operator read: what is missing, where, and the fix."""
    repos = ", ".join(
        f"{tenant_id}/{h.repo_slug} (swept at {str(h.ingested_revision)[:12]}, "
        f"{h.declared_chunks} chunks)"
        for h in missing[:5]
    )
    more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
    return (
        f"the store ({store}) holds no rows of {repos}{more}, which the ledger records as "
        "swept complete: the Chroma data is missing or empty. Restore it (NEO_HOME's chroma "
        f"directory or NEO_CHROMA_URL), or re-sweep: neo-assets sweep --force --tenant {tenant_id}"
    )
