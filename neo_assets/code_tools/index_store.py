"""The code index in the ledger (``schema.code_indexes``): built by the sweep's chunk stage
for the revision it declares, read by the tools at the revision a repo is indexed at.

One row per (tenant, repo, revision), written whole in one transaction: a reader finds
the complete index or none. A write keeps only the row it writes and the row of the
revision the repo is served at (its checkpoint), so the index follows the generations
and is reclaimed with them; a retired repo's rows go with ``forget_repo``.
"""

import hashlib
import json
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from neo_assets.code_tools.rules import Unit, file_record
from neo_assets.code_tools.schema import code_indexes
from neo_assets.sources.model import Envelope
from neo_assets.store.ledger import Ledger

FORMAT = 3
# (path, text, units) of the files the chunk stage parsed.
ParsedFile = tuple[str, str, list[Unit]]


def index_digest(chunking: str, env: Envelope) -> str:
    """What the index of ``env`` is built from: the chunking identity (parser, version,
    rules) and every yielded path with its blob."""
    h = hashlib.sha256(f"{FORMAT}\0{chunking}\0{env.kind}\0".encode())
    for e in env.entries:
        if e.yielded:
            h.update(f"{e.path}\0{e.blob}\0".encode())
    return h.hexdigest()


def _row_key(tenant_id: str, repo_slug: str) -> tuple[Any, ...]:
    c = code_indexes.c
    return (c.tenant_id == tenant_id, c.repo_slug == repo_slug)


def index_head(
    ledger: Ledger, tenant_id: str, repo_slug: str, revision: str
) -> tuple[str, str] | None:
    """(digest, kind) of the repo's index at ``revision``, or None."""
    c = code_indexes.c
    with ledger.engine.connect() as conn:
        row = conn.execute(
            sa.select(c.digest, c.kind).where(
                *_row_key(tenant_id, repo_slug), c.revision == revision
            )
        ).first()
    return None if row is None else (row.digest, row.kind)


def _encode(header: dict[str, Any], lines: dict[str, bytes]) -> bytes:
    """The stored form: zlib over the header's JSON, then one line per file, sorted by
    path: ``<path as a JSON string>\t<blob>\t<the file's record as JSON>``. A sweep that
    reuses a file's entry copies its line without decoding it."""
    body = json.dumps(header, separators=(",", ":")).encode() + b"\n"
    body += b"".join(lines[p] for p in sorted(lines))
    return zlib.compress(body, 1)


def _line(path: str, record: list[Any]) -> bytes:
    rec = json.dumps(record, separators=(",", ":"))
    return f"{json.dumps(path)}\t{record[0]}\t{rec}\n".encode()


def _raw(
    ledger: Ledger, tenant_id: str, repo_slug: str, revision: str | None
) -> tuple[dict[str, Any], list[bytes]] | None:
    c = code_indexes.c
    query = sa.select(c.payload).where(*_row_key(tenant_id, repo_slug))
    query = (
        query.where(c.revision == revision)
        if revision is not None
        else query.order_by(c.created_at.desc())
    )
    with ledger.engine.connect() as conn:
        row = conn.execute(query.limit(1)).first()
    if row is None:
        return None
    try:
        head, _, rest = zlib.decompress(row.payload).partition(b"\n")
        header = json.loads(head)
    except (zlib.error, ValueError):
        return None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        return None
    return header, rest.splitlines(keepends=True)


def read_payload(
    ledger: Ledger, tenant_id: str, repo_slug: str, revision: str | None = None
) -> dict[str, Any] | None:
    """The index at ``revision`` (None: the newest written), decoded: its header's keys
    and ``files`` (path -> record); None when there is none or it cannot be decoded (a
    torn record reads as unobserved)."""
    raw = _raw(ledger, tenant_id, repo_slug, revision)
    if raw is None:
        return None
    header, lines = raw
    files = {}
    try:
        for line in lines:
            path, _blob, rec = line.split(b"\t", 2)
            files[json.loads(path)] = json.loads(rec)
    except ValueError:
        return None
    return {**header, "files": files}


def _reusable_lines(
    ledger: Ledger, tenant_id: str, repo_slug: str, chunking: str
) -> dict[str, tuple[str, bytes]]:
    """path -> (blob, stored line) of the repo's newest index, when it was cut with
    ``chunking``; empty otherwise."""
    raw = _raw(ledger, tenant_id, repo_slug, None)
    if raw is None or raw[0].get("chunking") != chunking:
        return {}
    out = {}
    for line in raw[1]:
        path, blob, _rec = line.split(b"\t", 2)
        out[json.loads(path)] = (blob.decode(), line)
    return out


def build_index(
    ledger: Ledger,
    tenant_id: str,
    repo_slug: str,
    env: Envelope,
    *,
    chunking: str,
    parsed: Iterable[ParsedFile],
    parse_missing: Callable[[Sequence[str]], Iterable[ParsedFile]],
    serving_revision: str | None,
    now: float,
) -> float:
    """Record the index of ``env`` (one repo at one revision) unless the ledger holds it
    already; return the seconds it took. ``parsed``: the files the chunk stage parsed (with
    their units); a yielded file it did not parse (same blob as before) keeps its entry of
    the repo's newest index, and one no index holds is parsed by ``parse_missing``."""
    started = time.perf_counter()
    digest = index_digest(chunking, env)
    head = index_head(ledger, tenant_id, repo_slug, env.revision)
    if head is not None and head[0] == digest:
        return time.perf_counter() - started
    entries = {e.path: e for e in env.entries if e.yielded}
    lines: dict[str, bytes] = {}
    for path, text, units in parsed:
        e = entries.get(path)
        if e is not None:
            lines[path] = _line(path, file_record(path, text, e.blob, e.size, units))
    missing = [p for p in entries if p not in lines]
    if missing:
        old = _reusable_lines(ledger, tenant_id, repo_slug, chunking)
        for path in missing:
            kept = old.get(path)
            if kept is not None and kept[0] == entries[path].blob:
                lines[path] = kept[1]
        still = [p for p in missing if p not in lines]
        if still:
            for path, text, units in parse_missing(still):
                e = entries[path]
                lines[path] = _line(path, file_record(path, text, e.blob, e.size, units))
    header = {"format": FORMAT, "revision": env.revision, "kind": env.kind, "chunking": chunking}
    write_index(
        ledger,
        tenant_id,
        repo_slug,
        env.revision,
        digest=digest,
        kind=env.kind,
        files=len(lines),
        payload=_encode(header, lines),
        keep=serving_revision,
        now=now,
    )
    return time.perf_counter() - started


def write_index(
    ledger: Ledger,
    tenant_id: str,
    repo_slug: str,
    revision: str,
    *,
    digest: str,
    kind: str,
    files: int,
    payload: bytes,
    keep: str | None,
    now: float,
) -> None:
    """Write the index of ``revision`` and reclaim the repo's others but ``keep`` (the
    revision it is served at), in one transaction."""
    c = code_indexes.c
    keep_revisions = {revision} | ({keep} if keep else set())
    with ledger.engine.begin() as conn:
        conn.execute(
            sa.delete(code_indexes).where(
                *_row_key(tenant_id, repo_slug),
                sa.or_(c.revision.not_in(keep_revisions), c.revision == revision),
            )
        )
        conn.execute(
            sa.insert(code_indexes).values(
                tenant_id=tenant_id,
                repo_slug=repo_slug,
                revision=revision,
                digest=digest,
                kind=kind,
                files=files,
                payload=payload,
                created_at=now,
            )
        )


def reclaim_indexes(ledger: Ledger, tenant_id: str, repo_slug: str, keep: set[str | None]) -> int:
    """Drop the repo's indexes at every revision but ``keep``; how many went."""
    c = code_indexes.c
    kept = [r for r in keep if r]
    with ledger.engine.begin() as conn:
        done = conn.execute(
            sa.delete(code_indexes).where(*_row_key(tenant_id, repo_slug), c.revision.not_in(kept))
        )
    return done.rowcount or 0


def forget_repo(ledger: Ledger, tenant_id: str, repo_slug: str) -> None:
    """Drop every index of a repo (it was retired)."""
    with ledger.engine.begin() as conn:
        conn.execute(sa.delete(code_indexes).where(*_row_key(tenant_id, repo_slug)))


def indexed_revisions(ledger: Ledger, tenant_id: str) -> Mapping[str, list[str]]:
    """Per repo of the tenant, the revisions it has an index at (for status and tests)."""
    c = code_indexes.c
    with ledger.engine.connect() as conn:
        rows = conn.execute(
            sa.select(c.repo_slug, c.revision).where(c.tenant_id == tenant_id)
        ).all()
    out: dict[str, list[str]] = {}
    for slug, revision in rows:
        out.setdefault(slug, []).append(revision)
    return out
