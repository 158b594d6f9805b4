"""The knowledge base's invariants as checks over what is persisted (Chroma + ledger).

Each ``*_problems`` function returns a list of human-readable violations (empty = the
invariant holds), so a drill can assert ``not problems`` and print all of them at once.
They read only what the project persisted, never the project's own classifiers: a check
that reused the code under test could not catch it.

- **stamps** — every row carries every contract stamp with its type, and its id is the
  contract's chunk id recomputed from its stamps and its document (so no stamp can have
  come from content, and no content can have been filed under another identity);
- **containment** — every row's ``(tenantId, repoSlug)`` is a pair its tenant declared;
  a step for one tenant changed no row of another (``unchanged_problems`` on snapshots);
- **no hole** — every path the latest envelope yields holds a complete set: all ids the
  declared generation gives it present or fenced, or else the last set that was complete
  for it still intact (``HoleTracker`` remembers that set between checks);
- **evidence** — every durable fence matches its evidence: proven-content-poison only on
  content evidence, undeliverable only on a death/timeout strike, the admission band or
  a size refusal;
  never poison from a death, timeout, abort, refusal or write failure;
- **census** — a settled repo's two censuses equal the ledger's fences of its declared ids.
"""

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from neo_assets.core import codes
from neo_assets.core.ids.chunk_ids import chunk_id, is_chunk_id, part_chunk_id
from neo_assets.store import ledger_schema as t
from neo_assets.store.chroma_store import STAMP_KEYS, ChromaStore
from neo_assets.store.ledger import Ledger
from neo_assets.sweep.rules.censuses import CENSUS_MAX_IDS, decode_census
from neo_assets.sweep.rules.fence_gate import fence_family

STR_STAMPS = (
    "tenantId",
    "repoSlug",
    "sourcePath",
    "kind",
    "name",
    "parserId",
    "parserVersion",
    "revision",
    "embeddingGeneration",
)
# What may stand behind each fence family (the lane's evidence codes).
POISON_EVIDENCE = frozenset({codes.KB_VECTOR_EMBED_CONTENT})
UNDELIVERABLE_EVIDENCE = frozenset(
    {
        codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED,  # death strikes
        codes.KB_VECTOR_EMBED_TIMEOUT,  # timeout strikes
        codes.KB_VECTOR_EMBED_OVER_ADMISSION_BAND,  # over the band, never dispatched
        codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE,  # the provider refused it for its size
    }
)
# Evidence that fences at once, without strikes.
UNSTRUCK_EVIDENCE = frozenset(
    {codes.KB_VECTOR_EMBED_OVER_ADMISSION_BAND, codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE}
)
FENCE_CODE = {
    codes.DISPOSITION_PROVEN_CONTENT_POISON: codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON,
    codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY: codes.KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY,
}


@dataclass(frozen=True)
class Row:
    id: str
    document: str | None
    metadata: dict[str, Any]


RepoKey = tuple[str, str]  # (tenantId, repoSlug)


# ---------------------------------------------------------------------------- reading
def read_rows(store: ChromaStore, *, page: int = 2000) -> dict[str, Row]:
    """Every row of the collection (id, document, metadata), paged."""
    rows: dict[str, Row] = {}
    offset = 0
    while True:
        got = store.collection.get(include=["metadatas", "documents"], limit=page, offset=offset)
        for rid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True):
            if rid in rows:
                raise AssertionError(f"the collection returned id {rid} twice")
            rows[rid] = Row(rid, doc, dict(meta or {}))
        if len(got["ids"]) < page:
            return rows
        offset += page


def snapshot(rows: Mapping[str, Row], tenant_id: str) -> dict[str, dict[str, Any]]:
    """A tenant's rows as ``id -> (metadata, document)``: what must not change under
    another tenant's step."""
    return {
        rid: {"metadata": r.metadata, "document": r.document}
        for rid, r in rows.items()
        if r.metadata.get("tenantId") == tenant_id
    }


def repo_ids(rows: Mapping[str, Row], tenant_id: str, repo_slug: str) -> set[str]:
    return {
        rid
        for rid, r in rows.items()
        if r.metadata.get("tenantId") == tenant_id and r.metadata.get("repoSlug") == repo_slug
    }


def all_fences(ledger: Ledger) -> list[dict[str, Any]]:
    with ledger.engine.connect() as conn:
        found = conn.execute(sa.select(t.fences)).mappings()
        return [dict(r) for r in found]


def all_strikes(ledger: Ledger) -> list[dict[str, Any]]:
    with ledger.engine.connect() as conn:
        found = conn.execute(sa.select(t.strikes)).mappings()
        return [dict(r) for r in found]


def fenced_ids(ledger: Ledger, tenant_id: str, repo_slug: str, generation: str) -> set[str]:
    return {f["chunk_id"] for f in ledger.fences(tenant_id, repo_slug, generation)}


def declared_by_path(ledger: Ledger, tenant_id: str, repo_slug: str) -> dict[str, set[str]]:
    by_path: dict[str, set[str]] = {}
    for c in ledger.declared_chunks(tenant_id, repo_slug):
        by_path.setdefault(c.source_path, set()).add(c.chunk_id)
    return by_path


def yielded_paths(ledger: Ledger, tenant_id: str, repo_slug: str) -> set[str] | None:
    """The latest complete envelope's yielded paths; None when no envelope is recorded."""
    env = ledger.envelope(tenant_id, repo_slug)
    if env is None:
        return None
    return {p["path"] for p in env["paths"] if p["yielded"]}


# ---------------------------------------------------------------------------- stamps
def stamp_problems(rows: Iterable[Row]) -> list[str]:
    """Every row: all contract stamps with their types, and an id that is the chunk id of
    its own stamps and document (for a part of a chunk split to fit, the part id of the
    chunk its stored parts make)."""
    problems = []
    fitted: dict[tuple[Any, ...], dict[int, Row]] = {}
    for row in rows:
        md = row.metadata
        missing = [k for k in STAMP_KEYS if k not in md]
        if missing:
            problems.append(f"row {row.id[:12]} lacks stamps {missing}")
            continue
        bad = [k for k in STR_STAMPS if type(md[k]) is not str or md[k] == ""]
        if type(md["tenantConfigVersion"]) is not int or md["tenantConfigVersion"] < 1:
            bad.append("tenantConfigVersion")
        at = md["ingestedAt"]
        if type(at) not in (float, int) or not math.isfinite(at) or at <= 0:
            bad.append("ingestedAt")
        if bad:
            problems.append(f"row {row.id[:12]} has ill-typed stamps {bad}: {md}")
            continue
        if not is_chunk_id(row.id):
            problems.append(f"row id {row.id!r} is not a chunk id")
            continue
        expected = _own_id(md, md["name"], row.document or "")
        if expected == row.id:
            continue
        part = PART_NAME.fullmatch(md["name"])
        if part is not None:  # split to fit: its id comes from its parent's (checked below)
            base, index, count = part.group(1), int(part.group(2)), int(part.group(3))
            key = (*(md[k] for k in _PARENT_KEYS), base, count)
            fitted.setdefault(key, {})[index] = row
            continue
        problems.append(
            f"row {row.id[:12]}: its id is not the chunk id of its stamps and document "
            f"({md['tenantId']}/{md['repoSlug']}:{md['sourcePath']})"
        )
    for (*_, base, count), parts in fitted.items():
        first = next(iter(parts.values()))
        where = f"{first.metadata['tenantId']}/{first.metadata['repoSlug']}:{base}"
        if sorted(parts) != list(range(1, count + 1)):
            problems.append(f"{where}: parts {sorted(parts)} of {count} stored, not all")
            continue
        whole = "".join(parts[i].document or "" for i in range(1, count + 1))
        parent = _own_id(first.metadata, base, whole)
        for index, row in parts.items():
            if row.id != part_chunk_id(parent, index, count):
                problems.append(
                    f"row {row.id[:12]}: part {index}/{count} of {where}, but its id is not "
                    "the part id of the chunk its parts make"
                )
    return problems


# A part of a chunk split to fit the band: "<name> [part i/n]", its id from its parent's.
PART_NAME = re.compile(r"(.*) \[part (\d+)/(\d+)\]")
_PARENT_KEYS = ("tenantId", "repoSlug", "sourcePath", "kind", "parserId", "parserVersion")


def _own_id(md: Mapping[str, Any], name: str, document: str) -> str:
    return chunk_id(
        md["tenantId"],
        md["repoSlug"],
        md["kind"],
        name,
        document,
        md["sourcePath"],
        md["parserId"],
        md["parserVersion"],
    )


# ---------------------------------------------------------------------------- containment
def containment_problems(rows: Iterable[Row], owners: Mapping[str, set[str]]) -> list[str]:
    """Every row's repo is one its tenant declared (``owners``: tenant -> slugs ever
    declared; a repo removed later keeps its rows until reclaimed)."""
    problems = []
    for row in rows:
        tenant = row.metadata.get("tenantId")
        slug = row.metadata.get("repoSlug")
        if tenant not in owners or slug not in owners[tenant]:
            problems.append(f"row {row.id[:12]} is stamped {tenant}/{slug}, which no tenant owns")
    return problems


def unchanged_problems(
    before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]], who: str
) -> list[str]:
    """A snapshot taken before a step equals the one after (ids, stamps and documents)."""
    problems = []
    lost = sorted(set(before) - set(after))
    gained = sorted(set(after) - set(before))
    if lost:
        problems.append(f"{who}: {len(lost)} rows disappeared, e.g. {lost[:3]}")
    if gained:
        problems.append(f"{who}: {len(gained)} rows appeared, e.g. {gained[:3]}")
    changed = [rid for rid in set(before) & set(after) if before[rid] != after[rid]]
    if changed:
        problems.append(f"{who}: {len(changed)} rows changed, e.g. {sorted(changed)[:3]}")
    return problems


# ---------------------------------------------------------------------------- no hole
@dataclass
class HoleTracker:
    """Remembers, per repo and yielded path, the last id set that was complete, so the
    no-hole check can tell "the previous generation's rows are intact" from a hole.

    A path that leaves the yielded set forgets its set (its rows may rightly be reclaimed,
    and a path that comes back is new); a path never complete has nothing to lose yet.
    """

    last_complete: dict[RepoKey, dict[str, frozenset[str]]] = field(default_factory=dict)

    def check(
        self,
        ledger: Ledger,
        rows: Mapping[str, Row],
        repos: Iterable[RepoKey],
        generation: str,
    ) -> list[str]:
        repos = list(repos)
        for gone in set(self.last_complete) - set(repos):
            # An undeclared repo yields no path: its rows may rightly be reclaimed, and if it
            # is declared again it starts with nothing to lose, like a new repo.
            del self.last_complete[gone]
        problems = []
        for key in repos:
            problems += self._check_repo(ledger, rows, key, generation)
        return problems

    def _check_repo(
        self, ledger: Ledger, rows: Mapping[str, Row], key: RepoKey, generation: str
    ) -> list[str]:
        tenant_id, slug = key
        yielded = yielded_paths(ledger, tenant_id, slug)
        memory = self.last_complete.setdefault(key, {})
        if yielded is None:
            memory.clear()
            return []
        present = repo_ids(rows, tenant_id, slug)
        fenced = fenced_ids(ledger, tenant_id, slug, generation)
        declared = declared_by_path(ledger, tenant_id, slug)
        problems = []
        for path in sorted(yielded):
            ids = declared.get(path)
            if ids is not None and ids <= present | fenced:
                memory[path] = frozenset(ids)
                continue
            previous = memory.get(path)
            if previous is None:
                continue  # never complete: a new path has nothing to lose
            lost = previous - present - fenced
            if lost:
                have = len(ids - present - fenced) if ids is not None else "?"
                problems.append(
                    f"HOLE {tenant_id}/{slug}:{path!r}: the declared set lacks {have} ids "
                    f"and {len(lost)} of the previous complete set are gone"
                )
        for path in set(memory) - yielded:
            del memory[path]
        return problems


# ---------------------------------------------------------------------------- evidence
def fence_evidence_problems(ledger: Ledger) -> list[str]:
    """Every durable fence in the ledger, and every fence row of every persisted sweep
    summary, matches its evidence."""
    problems = []
    strikes = {
        (s["tenant_id"], s["repo_slug"], s["generation"], s["chunk_id"]): s
        for s in all_strikes(ledger)
    }
    for f in all_fences(ledger):
        where = f"fence {f['tenant_id']}/{f['repo_slug']} {f['chunk_id'][:12]}"
        disposition = f["disposition"]
        if disposition not in FENCE_CODE:
            problems.append(f"{where}: unknown disposition {disposition!r}")
            continue
        if f["reason_code"] != FENCE_CODE[disposition]:
            problems.append(f"{where}: reason {f['reason_code']} for {disposition}")
        try:
            receipt = json.loads(f["receipt"] or "null")
        except ValueError:
            receipt = None
        evidence = receipt.get("evidenceCode") if isinstance(receipt, dict) else None
        if disposition == codes.DISPOSITION_PROVEN_CONTENT_POISON:
            if evidence not in POISON_EVIDENCE:
                problems.append(f"{where}: content poison on evidence {evidence!r}")
        elif evidence not in UNDELIVERABLE_EVIDENCE:
            problems.append(f"{where}: undeliverable on evidence {evidence!r}")
        elif evidence not in UNSTRUCK_EVIDENCE:
            strike = strikes.get((f["tenant_id"], f["repo_slug"], f["generation"], f["chunk_id"]))
            threshold = receipt.get("threshold") if isinstance(receipt, dict) else None
            if strike is None or not isinstance(threshold, int) or strike["count"] < threshold:
                problems.append(f"{where}: graduated without its strikes ({strike}, {threshold})")
    with ledger.engine.connect() as conn:
        states = conn.execute(
            sa.select(
                t.repo_state.c.tenant_id, t.repo_state.c.repo_slug, t.repo_state.c.last_summary
            )
        ).all()
    for tenant_id, slug, raw in states:
        try:
            summary = json.loads(raw or "null")
        except ValueError:
            continue
        rows = summary.get("errors", []) if isinstance(summary, dict) else []
        for row in rows:
            if fence_family(row) == codes.DISPOSITION_PROVEN_CONTENT_POISON:
                evidence = row["details"].get("evidenceCode")
                if evidence not in POISON_EVIDENCE:
                    problems.append(
                        f"summary of {tenant_id}/{slug}: poison fence row on evidence {evidence!r}"
                    )
    return problems


# ---------------------------------------------------------------------------- census
def census_problems(ledger: Ledger, tenant_id: str, repo_slug: str) -> list[str]:
    """A settled repo (its last sweep ran its census after recording its declared
    generation): each census equals the ledger's fences of that family among its declared
    ids at the generation the sweep used."""
    state = ledger.repo_state(tenant_id, repo_slug)
    if state is None or not state.get("embedding_generation"):
        return []
    declared = {c.chunk_id for c in ledger.declared_chunks(tenant_id, repo_slug)}
    fences = ledger.fences(tenant_id, repo_slug, state["embedding_generation"])
    problems = []
    for disposition, column in (
        (codes.DISPOSITION_PROVEN_CONTENT_POISON, "content_poison_census"),
        (codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY, "undeliverable_census"),
    ):
        expected = sorted(
            f["chunk_id"]
            for f in fences
            if f["disposition"] == disposition and f["chunk_id"] in declared
        )
        census = decode_census(state[column])
        want = {"count": len(expected), "ids": expected[:CENSUS_MAX_IDS]}
        if census != want:
            problems.append(
                f"census {column} of {tenant_id}/{repo_slug} is {census}, the ledger's "
                f"fences say {want['count']} ({want['ids'][:3]}...)"
            )
    return problems


# ---------------------------------------------------------------------------- convergence
def converged_problems(
    ledger: Ledger,
    rows: Mapping[str, Row],
    declared_repos: Mapping[str, set[str]],
    revisions: Mapping[RepoKey, str],
    generation: str,
) -> list[str]:
    """After the faults stopped and the sweeps and reclaims ran: each declared repo's
    declared generation is at its current revision, every declared id is embedded or
    fenced, and the collection holds exactly the declared ids that are not fenced (no
    orphan of any kind is left, no row of an undeclared repo or tenant)."""
    problems = []
    expected_rows: set[str] = set()
    for tenant_id, slugs in declared_repos.items():
        for slug in slugs:
            key = (tenant_id, slug)
            gen = ledger.declared_generation(tenant_id, slug)
            if gen is None or gen["revision"] != revisions[key]:
                problems.append(f"{tenant_id}/{slug}: declared generation {gen} is not current")
                continue
            declared = {c.chunk_id for c in ledger.declared_chunks(tenant_id, slug)}
            fenced = fenced_ids(ledger, tenant_id, slug, generation) & declared
            present = repo_ids(rows, tenant_id, slug)
            missing = declared - fenced - present
            if missing:
                problems.append(f"{tenant_id}/{slug}: {len(missing)} declared ids not embedded")
            extra = present - declared
            if extra:
                problems.append(f"{tenant_id}/{slug}: {len(extra)} rows beyond the declaration")
            both = present & fenced
            if both:
                problems.append(f"{tenant_id}/{slug}: {len(both)} ids both fenced and embedded")
            state = ledger.repo_state(tenant_id, slug) or {}
            if state.get("last_outcome") != codes.OUTCOME_COMPLETE:
                problems.append(f"{tenant_id}/{slug}: last outcome {state.get('last_outcome')}")
            expected_rows |= declared - fenced
    strays = set(rows) - expected_rows
    if strays:
        sample = [rows[r].metadata.get("repoSlug") for r in sorted(strays)[:5]]
        problems.append(f"{len(strays)} rows of no declared repo remain (repos {sample})")
    return problems
