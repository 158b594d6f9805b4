"""The code index in the ledger: one row per indexed file content, shared across revisions,
and one file map per (tenant, repo, revision), written in one transaction so a reader
finds the whole index or none. Only the served and the written maps are kept."""

import hashlib
import json
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from neo_assets.code_tools.rules.index import Unit, file_record
from neo_assets.sources.model import Envelope
from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_rows import repo_rows
from neo_assets.store.ledger_schema import code_index_files, code_indexes

FORMAT = 4
# (path, text, units) of the files the chunk stage parsed.
ParsedFile = tuple[str, str, list[Unit]]
# Keys per statement when deleting file rows (under every backend's bound-parameter cap).
_BATCH = 500


def index_digest(chunking: str, env: Envelope) -> str:
    """What the index of ``env`` is built from: the chunking identity (parser, version,
    rules) and every yielded path with its blob."""
    h = hashlib.sha256(f"{FORMAT}\0{chunking}\0{env.kind}\0".encode())
    for e in env.entries:
        if e.yielded:
            h.update(f"{e.path}\0{e.blob}\0".encode())
    return h.hexdigest()


def file_key(chunking: str, path: str, blob: str) -> str:
    """The file row a path with ``blob`` uses: its record depends on the content and on
    the language its path gives it, cut with ``chunking``."""
    return hashlib.sha256(f"{FORMAT}\0{chunking}\0{path}\0{blob}".encode()).hexdigest()


def index_head(
    ledger: Ledger, tenant_id: str, repo_slug: str, revision: str
) -> tuple[str, str] | None:
    """(digest, kind) of the repo's index at ``revision``, or None."""
    c = code_indexes.c
    with ledger.engine.connect() as conn:
        row = conn.execute(
            sa.select(c.digest, c.kind).where(
                repo_rows(code_indexes, tenant_id, repo_slug), c.revision == revision
            )
        ).first()
    return None if row is None else (row.digest, row.kind)


def _encode_map(header: dict[str, Any], files: Mapping[str, tuple[str, str]]) -> bytes:
    """The stored map: zlib over the header's JSON, then one line per file, sorted by
    path: ``<path as a JSON string>\t<blob>\t<file key>``."""
    body = json.dumps(header, separators=(",", ":")).encode() + b"\n"
    body += b"".join(
        f"{json.dumps(p)}\t{files[p][0]}\t{files[p][1]}\n".encode() for p in sorted(files)
    )
    return zlib.compress(body, 1)


def _decode_map(payload: bytes) -> tuple[dict[str, Any], dict[str, tuple[str, str]]] | None:
    """(header, path -> (blob, file key)), or None when it cannot be decoded or is of
    another format (a torn or older map reads as unobserved)."""
    try:
        head, _, rest = zlib.decompress(payload).partition(b"\n")
        header = json.loads(head)
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            return None
        files = {}
        for line in rest.splitlines():
            path, blob, key = line.split(b"\t")
            files[json.loads(path)] = (blob.decode(), key.decode())
    except (zlib.error, ValueError):
        return None
    return header, files


def _encode_record(record: list[Any]) -> bytes:
    return zlib.compress(json.dumps(record, separators=(",", ":")).encode(), 1)


def read_payload(
    ledger: Ledger, tenant_id: str, repo_slug: str, revision: str | None = None
) -> dict[str, Any] | None:
    """The index at ``revision`` (None: the newest written), decoded: its header's keys
    and ``files`` (path -> record); None when there is none, it cannot be decoded or a
    file row it names is missing (a torn index reads as unobserved)."""
    c = code_indexes.c
    query = sa.select(c.payload).where(repo_rows(code_indexes, tenant_id, repo_slug))
    query = (
        query.where(c.revision == revision)
        if revision is not None
        else query.order_by(c.created_at.desc())
    )
    f = code_index_files.c
    with ledger.engine.connect() as conn:
        row = conn.execute(query.limit(1)).first()
        decoded = None if row is None else _decode_map(row.payload)
        if decoded is None:
            return None
        stored = dict(
            conn.execute(
                sa.select(f.file_key, f.record).where(
                    repo_rows(code_index_files, tenant_id, repo_slug)
                )
            ).all()
        )
    header, mapping = decoded
    files = {}
    try:
        for path, (_blob, key) in mapping.items():
            files[path] = json.loads(zlib.decompress(stored[key]))
    except (KeyError, zlib.error, ValueError):
        return None
    return {**header, "files": files}


def new_file_rows(
    env: Envelope,
    keys: Mapping[str, str],
    stored: set[str],
    parsed: Iterable[ParsedFile],
    parse_missing: Callable[[Sequence[str]], Iterable[ParsedFile]],
) -> dict[str, tuple[str, bytes]]:
    """file key -> (blob, encoded record) of the yielded files no stored row holds: from
    the chunk stage's parse when it parsed them, else parsed by ``parse_missing``."""
    entries = {e.path: e for e in env.entries if e.yielded}
    rows: dict[str, tuple[str, bytes]] = {}

    def add(path: str, text: str, units: list[Unit]) -> None:
        e = entries.get(path)
        if e is not None and keys[path] not in stored and keys[path] not in rows:
            record = file_record(path, text, e.blob, e.size, units)
            rows[keys[path]] = (e.blob, _encode_record(record))

    for path, text, units in parsed:
        add(path, text, units)
    still = [p for p in entries if keys[p] not in stored and keys[p] not in rows]
    if still:
        for path, text, units in parse_missing(still):
            add(path, text, units)
    return rows


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
    already; return the seconds it took. ``parsed``: the files the chunk stage parsed
    (with their units); a yielded file whose content a stored row holds reuses that row,
    and one none holds and the chunk stage did not parse is parsed by ``parse_missing``."""
    started = time.perf_counter()
    digest = index_digest(chunking, env)
    head = index_head(ledger, tenant_id, repo_slug, env.revision)
    if head is not None and head[0] == digest:
        return time.perf_counter() - started
    files = {e.path: (e.blob, file_key(chunking, e.path, e.blob)) for e in env.entries if e.yielded}
    keys = {path: key for path, (_blob, key) in files.items()}
    with ledger.engine.connect() as conn:
        stored = _keys_in(conn, tenant_id, repo_slug)
    rows = new_file_rows(env, keys, stored, parsed, parse_missing)
    header = {"format": FORMAT, "revision": env.revision, "kind": env.kind, "chunking": chunking}
    index = {
        "tenant_id": tenant_id,
        "repo_slug": repo_slug,
        "revision": env.revision,
        "digest": digest,
        "kind": env.kind,
        "files": len(files),
        "payload": _encode_map(header, files),
        "created_at": now,
    }
    write_index(ledger, index, rows, keep=serving_revision)
    return time.perf_counter() - started


def write_index(
    ledger: Ledger,
    index: Mapping[str, Any],
    rows: Mapping[str, tuple[str, bytes]],
    *,
    keep: str | None,
) -> None:
    """Write the new file ``rows`` and the map ``index`` (a ``code_indexes`` row), reclaim
    the repo's other maps but ``keep`` (the revision it is served at) and the file rows no
    kept map names, in one transaction."""
    c = code_indexes.c
    tenant_id, repo_slug, revision = index["tenant_id"], index["repo_slug"], index["revision"]
    keep_revisions = {revision} | ({keep} if keep else set())
    with ledger.engine.begin() as conn:
        conn.execute(
            sa.delete(code_indexes).where(
                repo_rows(code_indexes, tenant_id, repo_slug),
                sa.or_(c.revision.not_in(keep_revisions), c.revision == revision),
            )
        )
        # Checked again inside the transaction: a row another writer added is reused.
        present = _keys_in(conn, tenant_id, repo_slug)
        fresh = [
            {"tenant_id": tenant_id, "repo_slug": repo_slug, "file_key": k, "blob": b, "record": r}
            for k, (b, r) in rows.items()
            if k not in present
        ]
        if fresh:
            conn.execute(sa.insert(code_index_files), fresh)
        conn.execute(sa.insert(code_indexes).values(**index))
        _drop_unnamed(conn, tenant_id, repo_slug, present | set(rows))


def _keys_in(conn: sa.Connection, tenant_id: str, repo_slug: str) -> set[str]:
    f = code_index_files.c
    rows = conn.execute(
        sa.select(f.file_key).where(repo_rows(code_index_files, tenant_id, repo_slug))
    ).all()
    return {r[0] for r in rows}


def _drop_unnamed(conn: sa.Connection, tenant_id: str, repo_slug: str, present: set[str]) -> int:
    """Drop the repo's file rows (of ``present``) that no map of the repo names; how many."""
    c = code_indexes.c
    named: set[str] = set()
    for (payload,) in conn.execute(
        sa.select(c.payload).where(repo_rows(code_indexes, tenant_id, repo_slug))
    ).all():
        decoded = _decode_map(payload)
        if decoded is not None:
            named.update(key for _blob, key in decoded[1].values())
    gone = sorted(present - named)
    for i in range(0, len(gone), _BATCH):
        conn.execute(
            sa.delete(code_index_files).where(
                repo_rows(code_index_files, tenant_id, repo_slug),
                code_index_files.c.file_key.in_(gone[i : i + _BATCH]),
            )
        )
    return len(gone)


def reclaim_indexes(ledger: Ledger, tenant_id: str, repo_slug: str, keep: set[str | None]) -> int:
    """Drop the repo's indexes at every revision but ``keep`` (and the file rows only
    they named); how many maps went."""
    c = code_indexes.c
    kept = [r for r in keep if r]
    with ledger.engine.begin() as conn:
        done = conn.execute(
            sa.delete(code_indexes).where(
                repo_rows(code_indexes, tenant_id, repo_slug), c.revision.not_in(kept)
            )
        )
        if done.rowcount:
            _drop_unnamed(conn, tenant_id, repo_slug, _keys_in(conn, tenant_id, repo_slug))
    return done.rowcount or 0


def forget_repo(ledger: Ledger, tenant_id: str, repo_slug: str) -> None:
    """Drop every index of a repo and every file row (it was retired)."""
    with ledger.engine.begin() as conn:
        conn.execute(sa.delete(code_indexes).where(repo_rows(code_indexes, tenant_id, repo_slug)))
        conn.execute(
            sa.delete(code_index_files).where(repo_rows(code_index_files, tenant_id, repo_slug))
        )


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


def file_rows(ledger: Ledger, tenant_id: str, repo_slug: str | None = None) -> int:
    """How many file rows the tenant (or one of its repos) holds (for status and tests)."""
    f = code_index_files.c
    query = sa.select(sa.func.count()).select_from(code_index_files)
    query = query.where(f.tenant_id == tenant_id)
    if repo_slug is not None:
        query = query.where(f.repo_slug == repo_slug)
    with ledger.engine.connect() as conn:
        return int(conn.execute(query).scalar_one())
