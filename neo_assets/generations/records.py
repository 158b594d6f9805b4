"""The ledger's record of embedding generations: where each one's rows live, what
rebuilds its provider for queries, and per repo whether it is complete (tables in
``ledger_schema``: ``embedding_generations``, ``repo_generations``)."""

from typing import Any

import sqlalchemy as sa

from neo_assets.generations.rules import GenerationRecord, RepoGeneration
from neo_assets.store import ledger_schema as t
from neo_assets.store.ledger import Ledger

STATE_BUILDING = "building"
STATE_COMPLETE = "complete"


def _record(row: Any) -> GenerationRecord:
    """A row of ``embedding_generations``: its columns are the record's fields."""
    return GenerationRecord(**row._mapping)


def generation_records(ledger: Ledger) -> dict[str, GenerationRecord]:
    with ledger.engine.connect() as conn:
        rows = conn.execute(sa.select(t.embedding_generations)).all()
    return {r.generation: _record(r) for r in rows}


def register_generation(
    ledger: Ledger,
    generation: str,
    *,
    collection_name: str,
    provider: str,
    model: str,
    base_url: str | None,
    dimensions: int,
    now: float,
) -> GenerationRecord:
    """Record ``generation`` and what rebuilds its provider (committed). The knowledge base's
    first generation lives in the un-suffixed collection, later ones in ``collection_name``;
    a recorded one keeps its collection and, if reclaimed, is building again."""
    g = t.embedding_generations.c
    spec = {"provider": provider, "model": model, "base_url": base_url, "dimensions": dimensions}
    for _attempt in range(2):
        try:
            with ledger.engine.begin() as conn:
                found = conn.execute(
                    sa.select(g.generation).where(g.generation == generation)
                ).first()
                if found is None:
                    count = sa.select(sa.func.count()).select_from(t.embedding_generations)
                    first = not conn.execute(count).scalar()
                    conn.execute(
                        sa.insert(t.embedding_generations).values(
                            generation=generation,
                            collection_name=None if first else collection_name,
                            created_at=now,
                            **spec,
                        )
                    )
                else:
                    conn.execute(
                        sa.update(t.embedding_generations)
                        .where(g.generation == generation)
                        .values(reclaimed_at=None, **spec)
                    )
            break
        except sa.exc.IntegrityError:
            # Another repo's sweep recorded it first (sweeps of a first run go in
            # parallel): it is recorded now, so the second attempt updates it.
            continue
    record = generation_records(ledger).get(generation)
    assert record is not None
    return record


def mark_reclaimed(ledger: Ledger, generation: str, now: float) -> None:
    g = t.embedding_generations.c
    with ledger.engine.begin() as conn:
        conn.execute(
            sa.update(t.embedding_generations)
            .where(g.generation == generation)
            .values(reclaimed_at=now)
        )
        conn.execute(
            sa.delete(t.repo_generations).where(t.repo_generations.c.generation == generation)
        )


def repo_generations(ledger: Ledger, tenant_id: str | None = None) -> list[RepoGeneration]:
    r = t.repo_generations.c
    query = sa.select(t.repo_generations)
    if tenant_id is not None:
        query = query.where(r.tenant_id == tenant_id)
    with ledger.engine.connect() as conn:
        rows = conn.execute(query).all()
    # The record's fields are the row's columns, its state read as ``complete``.
    return [
        RepoGeneration(
            **{column: value for column, value in row._mapping.items() if column != "state"},
            complete=row.state == STATE_COMPLETE,
        )
        for row in rows
    ]


def record_repo_generation(
    ledger: Ledger,
    tenant_id: str,
    repo_slug: str,
    generation: str,
    *,
    complete: bool,
    chunks: int | None,
    present: int | None,
    now: float,
) -> None:
    """The progress of a sweep at ``generation``; once complete, the repo stays complete
    at it (its collection keeps a complete set per path: no hole)."""
    r = t.repo_generations.c
    key = (r.tenant_id == tenant_id, r.repo_slug == repo_slug, r.generation == generation)
    with ledger.engine.begin() as conn:
        row = conn.execute(sa.select(r.state, r.completed_at).where(*key)).first()
        was_complete = row is not None and row.state == STATE_COMPLETE
        state = STATE_COMPLETE if (complete or was_complete) else STATE_BUILDING
        completed_at = row.completed_at if was_complete else (now if complete else None)
        values = {
            "state": state,
            "chunks": chunks,
            "present": present,
            "completed_at": completed_at,
            "updated_at": now,
        }
        if row is None:
            conn.execute(
                sa.insert(t.repo_generations).values(
                    tenant_id=tenant_id, repo_slug=repo_slug, generation=generation, **values
                )
            )
        else:
            conn.execute(sa.update(t.repo_generations).where(*key).values(**values))


def forget_repo_generations(ledger: Ledger, tenant_id: str, generation: str) -> None:
    """The tenant's repos are no longer at ``generation`` (its rows were reclaimed)."""
    r = t.repo_generations.c
    with ledger.engine.begin() as conn:
        conn.execute(
            sa.delete(t.repo_generations).where(
                r.tenant_id == tenant_id, r.generation == generation
            )
        )
