"""A repo's related-chunk links in the ledger, replaced whole or updated list by list, and
stored only while the declared generation they were computed from is still current. Reads
are scoped by tenant; a torn list reads as unobserved (no neighbour, not a wrong one)."""

import contextlib
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

import sqlalchemy as sa

from neo_assets.links.rules.records import (
    LINK_KINDS,
    LINK_SEMANTIC,
    LINK_TEMPORAL,
    LinkRecord,
    Neighbour,
    check_link_kind,
    iter_kept_lists,
    link_records,
    strongest_neighbours,
)
from neo_assets.store import ledger_schema as t
from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_schema import chunk_link_sets, chunk_links

_INSERT_BATCH = 5000
_READ_BATCH = 500  # ids per IN (...): well under SQLite's bound-parameter limit


def _encode(kept: Sequence[tuple[str, float]]) -> str:
    return json.dumps([[nid, w] for nid, w in kept], separators=(",", ":"))


def _decode(raw: object) -> list[tuple[str, float]] | None:
    """The stored list, or None when it is not a list of ``[id, finite weight]``."""
    if not isinstance(raw, str):
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, list):
        return None
    out: list[tuple[str, float]] = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            return None
        w = item[1]
        if not isinstance(w, int | float) or isinstance(w, bool) or not math.isfinite(w):
            return None
        out.append((item[0], float(w)))
    return out


def _generation_still(
    conn: sa.Connection, tenant_id: str, repo_slug: str, generation_recorded_at: float
) -> bool:
    """Whether the repo's declared generation is still the one recorded at
    ``generation_recorded_at`` (its row locked for the rest of the transaction)."""
    gen = t.declared_generations
    current = conn.execute(
        sa.select(gen.c.recorded_at)
        .where(gen.c.tenant_id == tenant_id, gen.c.repo_slug == repo_slug)
        .with_for_update()
    ).scalar()
    return current is not None and float(current) == float(generation_recorded_at)


def _link_row(
    tenant_id: str, repo_slug: str, chunk_id: str, kind: str, kept: Sequence[tuple[str, float]]
) -> dict[str, Any]:
    return {
        "tenant_id": tenant_id,
        "repo_slug": repo_slug,
        "chunk_id": chunk_id,
        "link_kind": kind,
        "neighbours": _encode(kept),
    }


def link_set_values(
    revision: str,
    generation_recorded_at: float,
    now: float,
    chunks: int,
    counts: Mapping[str, int],
    params: Mapping[str, Any],
) -> dict[str, Any]:
    """A link set as ``link_set`` reads it back (what ``same_link_set`` compares)."""
    return {
        "revision": revision,
        "generation_recorded_at": float(generation_recorded_at),
        "computed_at": float(now),
        "chunks": chunks,
        "temporal_links": int(counts.get(LINK_TEMPORAL, 0)),
        "semantic_links": int(counts.get(LINK_SEMANTIC, 0)),
        "params": dict(params),
    }


def _set_row(*values: Any) -> dict[str, Any]:
    """``link_set_values`` as the row stores it (its parameters as JSON)."""
    row = link_set_values(*values)
    return {**row, "params": json.dumps(row["params"], sort_keys=True)}


def replace_links(
    ledger: Ledger,
    tenant_id: str,
    repo_slug: str,
    links: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]],
    *,
    revision: str,
    generation_recorded_at: float,
    chunks: int,
    params: Mapping[str, Any],
    now: float,
) -> bool:
    """Replace the repo's links (committed) when its declared generation is still the one
    recorded at ``generation_recorded_at``; False, nothing written, otherwise. Inserted a
    batch at a time; a list refused midway rolls the whole replacement back."""
    kinds = list(links)
    for kind in kinds:
        check_link_kind(kind)  # refused before anything is written
    counts = dict.fromkeys(LINK_KINDS, 0)

    def encoded() -> Iterator[dict[str, Any]]:
        for kind in kinds:
            for chunk_id, kept in iter_kept_lists(kind, links[kind]):
                counts[kind] += len(kept)
                yield _link_row(tenant_id, repo_slug, chunk_id, kind, kept)

    key_links = (chunk_links.c.tenant_id == tenant_id) & (chunk_links.c.repo_slug == repo_slug)
    key_sets = _the_set(tenant_id, repo_slug)
    with ledger.engine.begin() as conn:
        if not _generation_still(conn, tenant_id, repo_slug, generation_recorded_at):
            return False
        conn.execute(sa.delete(chunk_links).where(key_links))
        rows = encoded()
        while batch := list(islice(rows, _INSERT_BATCH)):
            conn.execute(sa.insert(chunk_links), batch)
        conn.execute(sa.delete(chunk_link_sets).where(key_sets))
        conn.execute(
            sa.insert(chunk_link_sets).values(
                tenant_id=tenant_id,
                repo_slug=repo_slug,
                **_set_row(revision, generation_recorded_at, now, chunks, counts, params),
            )
        )
    return True


class LinkSetMoved(Exception):
    """The repo's stored link set is no longer the one an update was computed against."""


def update_links(
    ledger: Ledger,
    tenant_id: str,
    repo_slug: str,
    changed: Mapping[str, Mapping[str, Sequence[tuple[str, float]]]],
    *,
    expected: Mapping[str, Any],
    revision: str,
    generation_recorded_at: float,
    chunks: int,
    counts: Mapping[str, int],
    params: Mapping[str, Any],
    now: float,
) -> bool:
    """Change only some stored lists (``changed``: kind -> chunk -> new list, empty deletes).
    Only while the generation is current (else False) and the stored set is still
    ``expected`` (else ``LinkSetMoved``): otherwise the lists were diffed against rows
    that are gone."""
    rows: list[dict[str, Any]] = []
    cleared: dict[str, list[str]] = {}
    for kind, by_chunk in changed.items():
        cleared[kind] = list(by_chunk)
        for chunk_id, kept in iter_kept_lists(kind, by_chunk):
            rows.append(_link_row(tenant_id, repo_slug, chunk_id, kind, kept))
    key_sets = _the_set(tenant_id, repo_slug)
    c = chunk_links.c
    with ledger.engine.begin() as conn:
        if not _generation_still(conn, tenant_id, repo_slug, generation_recorded_at):
            return False
        head = conn.execute(sa.select(chunk_link_sets).where(key_sets).with_for_update())
        found = head.mappings().first()
        if found is None or not same_link_set(found, expected):
            raise LinkSetMoved(f"{tenant_id}/{repo_slug}: the stored link set changed")
        for kind, chunk_ids in cleared.items():
            for start in range(0, len(chunk_ids), _READ_BATCH):
                conn.execute(
                    sa.delete(chunk_links).where(
                        c.tenant_id == tenant_id,
                        c.repo_slug == repo_slug,
                        c.link_kind == kind,
                        c.chunk_id.in_(chunk_ids[start : start + _READ_BATCH]),
                    )
                )
        for start in range(0, len(rows), _INSERT_BATCH):
            conn.execute(sa.insert(chunk_links), rows[start : start + _INSERT_BATCH])
        conn.execute(
            sa.update(chunk_link_sets)
            .where(key_sets)
            .values(**_set_row(revision, generation_recorded_at, now, chunks, counts, params))
        )
    return True


def same_link_set(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two link set rows (as ``link_set`` returns them, or the raw row) name the
    same stored set: revision, times, counts and parameters all equal."""
    return _set_fields(a) == _set_fields(b)


def _set_fields(row: Mapping[str, Any]) -> tuple[Any, ...]:
    def seconds(key: str) -> float | None:
        return None if row.get(key) is None else float(row[key])

    return (
        row.get("revision"),
        seconds("generation_recorded_at"),
        seconds("computed_at"),
        row.get("chunks"),
        row.get("temporal_links"),
        row.get("semantic_links"),
        json.dumps(_params(row.get("params")), sort_keys=True),
    )


def _the_set(tenant_id: str, repo_slug: str) -> sa.ColumnElement[bool]:
    """The repo's row of ``chunk_link_sets``."""
    return (chunk_link_sets.c.tenant_id == tenant_id) & (chunk_link_sets.c.repo_slug == repo_slug)


def _params(raw: object) -> Any:
    """Stored parameters (JSON text) read back; torn, they read as None (unobserved)."""
    with contextlib.suppress(ValueError):
        return json.loads(raw) if isinstance(raw, str) else raw
    return None


def link_set(ledger: Ledger, tenant_id: str, repo_slug: str) -> dict[str, Any] | None:
    """The repo's stored link set (revision, counts, params), or None when never computed."""
    query = sa.select(chunk_link_sets).where(_the_set(tenant_id, repo_slug))
    with ledger.engine.connect() as conn:
        row = conn.execute(query).mappings().first()
    return None if row is None else {**dict(row), "params": _params(row["params"])}


def repo_links(ledger: Ledger, tenant_id: str, repo_slug: str) -> list[LinkRecord]:
    """Every stored link of the repo as flat records, by chunk, kind and rank."""
    c = chunk_links.c
    with ledger.engine.connect() as conn:
        rows = conn.execute(
            sa.select(c.chunk_id, c.link_kind, c.neighbours)
            .where(c.tenant_id == tenant_id, c.repo_slug == repo_slug)
            .order_by(c.chunk_id, c.link_kind)
        ).all()
    out: list[LinkRecord] = []
    for r in rows:
        kept = _decode(r.neighbours)
        if kept is not None and r.link_kind in LINK_KINDS:
            out.extend(link_records(r.link_kind, {r.chunk_id: kept}))
    return out


def neighbours(
    ledger: Ledger, tenant_id: str, chunk_ids: Iterable[str], *, limit: int
) -> dict[str, list[Neighbour]]:
    """The ``limit`` strongest neighbours of each chunk among the tenant's links, both
    kinds merged (``links.rules.records.strongest_neighbours``). Only links stored under
    ``tenant_id`` are read, so no other tenant's neighbour can come back."""
    wanted = list(dict.fromkeys(chunk_ids))
    found: dict[str, list[tuple[str, str, float]]] = {cid: [] for cid in wanted}
    if limit > 0:
        c = chunk_links.c
        with ledger.engine.connect() as conn:
            for start in range(0, len(wanted), _READ_BATCH):
                batch = wanted[start : start + _READ_BATCH]
                rows = conn.execute(
                    sa.select(c.chunk_id, c.link_kind, c.neighbours).where(
                        c.tenant_id == tenant_id, c.chunk_id.in_(batch)
                    )
                )
                for r in rows:
                    kept = _decode(r.neighbours) or []
                    # The strongest `limit` over both kinds are among each kind's first `limit`.
                    found[r.chunk_id].extend((nid, r.link_kind, w) for nid, w in kept[:limit])
    return {
        cid: strongest_neighbours(links, exclude=cid, limit=limit) for cid, links in found.items()
    }
