"""The ledger's self-evaluations and quality decisions (tables in ``store/ledger_schema.py``)."""

from collections.abc import Iterable
from dataclasses import asdict, fields

import sqlalchemy as sa

from neo_assets.quality.gate import QualityScore
from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_rows import first_row, write_row
from neo_assets.store.ledger_schema import quality_decisions, retrieval_quality


def record_score(ledger: Ledger, tenant_id: str, score: QualityScore) -> None:
    # A score's fields are the row's columns, but for the tenant.
    with ledger.engine.begin() as conn:
        conn.execute(sa.insert(retrieval_quality).values(tenant_id=tenant_id, **asdict(score)))


def _score(row: sa.Row) -> QualityScore:
    return QualityScore(**{f.name: getattr(row, f.name) for f in fields(QualityScore)})


def score_history(
    ledger: Ledger, tenant_id: str, repo_slug: str, generation: str, limit: int = 2
) -> list[QualityScore]:
    """The latest ``limit`` evaluations of one repo at one generation, newest first."""
    q = retrieval_quality.c
    with ledger.engine.connect() as conn:
        rows = conn.execute(
            sa.select(retrieval_quality)
            .where(q.tenant_id == tenant_id, q.repo_slug == repo_slug, q.generation == generation)
            .order_by(q.evaluated_at.desc(), q.id.desc())
            .limit(limit)
        ).all()
    return [_score(r) for r in rows]


def latest_scores(
    ledger: Ledger, tenant_id: str, repo_slugs: Iterable[str]
) -> dict[tuple[str, str], QualityScore]:
    """The latest evaluation per (repo, generation) of ``tenant_id``'s repos."""
    q = retrieval_quality.c
    slugs = list(repo_slugs)
    if not slugs:
        return {}
    with ledger.engine.connect() as conn:
        rows = conn.execute(
            sa.select(retrieval_quality)
            .where(q.tenant_id == tenant_id, q.repo_slug.in_(slugs))
            .order_by(q.evaluated_at, q.id)
        ).all()
    return {(r.repo_slug, r.generation): _score(r) for r in rows}  # the newest wins


def record_decision(
    ledger: Ledger, tenant_id: str, generation: str, reason: str, decided_by: str, now: float
) -> None:
    """An operator lets ``generation`` serve ``tenant_id`` past the quality gate."""
    write_row(
        ledger.engine,
        quality_decisions,
        tenant_id=tenant_id,
        generation=generation,
        reason=reason,
        decided_by=decided_by,
        decided_at=now,
    )


def decision(ledger: Ledger, tenant_id: str, generation: str) -> dict | None:
    d = quality_decisions.c
    query = sa.select(quality_decisions).where(d.tenant_id == tenant_id, d.generation == generation)
    return first_row(ledger.engine, query)
