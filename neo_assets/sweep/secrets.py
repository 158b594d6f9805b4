"""The secret gate of a sweep: every chunk about to be embedded is scanned
(``secrets.rules.scan``) each sweep; one holding a secret is fenced ``secret`` and never
reaches the lane, the store or a reader. The scan is the authority: a fence it no longer
confirms is lifted."""

from collections.abc import Callable, Mapping
from typing import Any

from neo_assets.core import codes
from neo_assets.embedding.rules.lane import FenceRecord
from neo_assets.embedding.rules.lane_rows import fence_row
from neo_assets.secrets.rules import fence_receipt, scan
from neo_assets.sources.rules.chunks import DeclaredChunk
from neo_assets.store.ledger_fences import LedgerFenceBook


def fence_secrets(
    chunks: Mapping[str, DeclaredChunk],
    fence_book: LedgerFenceBook,
    generation: str,
    clock: Callable[[], float],
) -> tuple[set[str], list[dict[str, Any]]]:
    """(ids of ``chunks`` that hold a secret, their fence rows for the summary). Each
    fence is durable before this returns; stale ``secret`` fences of clean chunks are
    lifted."""
    existing: Mapping[str, FenceRecord] = fence_book.fence_records(generation)
    secret: set[str] = set()
    rows: list[dict[str, Any]] = []
    for chunk_id, chunk in chunks.items():
        findings = scan(chunk.content or "", chunk.source_path)
        record = existing.get(chunk_id)
        if not findings:
            if record is not None and record.disposition == codes.DISPOSITION_SECRET:
                fence_book.ledger.delete_fence(
                    fence_book.tenant_id, fence_book.repo_slug, generation, chunk_id
                )
            continue
        secret.add(chunk_id)
        receipt = fence_receipt(findings, chunk.source_path, chunk.start_line, chunk.end_line)
        fresh = (
            record is None
            or record.disposition != codes.DISPOSITION_SECRET
            or dict(record.receipt) != receipt
        )
        observed_at = clock() if fresh else record.observed_at  # type: ignore[union-attr]
        fence = (codes.DISPOSITION_SECRET, codes.KB_CHUNK_SECRET, receipt, observed_at)
        if fresh:
            fence_book.record_fence(generation, FenceRecord(chunk_id, *fence))
        rows.append(fence_row(chunk_id, *fence, recorded_this_sweep=fresh))
    return secret, rows
