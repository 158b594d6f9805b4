"""Reconcile one tenant: classify its rows, re-stamp config-stale declared rows, and, only
when ``NEO_RECONCILIATION_ENABLED`` is true, reclaim orphans by id in batches, behind
the guards of docs/design/reconcile.md#deleting."""

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from neo_assets.config.settings import Settings
from neo_assets.generations.serving import configured_generation, generation_store
from neo_assets.reconcile.generations import reclaim_generations
from neo_assets.reconcile.reading import (
    TenantSnapshot,
    declaration_marker,
    durable_fenced_ids,
    find_tenant,
    read_declaration,
    read_snapshot,
)
from neo_assets.reconcile.retirement import read_retired
from neo_assets.reconcile.rules.checks import count_by_tenant, foreign_count, residue
from neo_assets.reconcile.rules.declaration import RepoDeclaration, TenantDeclaration
from neo_assets.reconcile.rules.no_hole import plan_keeps_complete_sets, reverify_before_delete
from neo_assets.reconcile.rules.orphans import classify_orphans
from neo_assets.reconcile.rules.plan import ACTIONABLE_KINDS, ORPHAN_KINDS, ReconcilePlan
from neo_assets.reconcile.rules.reclaim_gate import reclaim_blocked
from neo_assets.reconcile.rules.retirement import Retired
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.leases import LeaseKeeper, LeaseLostError, holder_detail
from neo_assets.store.ledger import Ledger
from neo_assets.sweep.rules.leases import sweep_lease_key
from neo_assets.tenants.validation import TenantsFile

# Example ids per kind (and offending paths) in a report: enough to act on, bounded.
REPORT_MAX_IDS = 20


@dataclass
class ReconcileOutcome:
    """A reconciliation's JSON-able report, and for the checks the yielded paths it
    deleted rows from (repoSlug -> sourcePaths)."""

    report: dict[str, Any]
    plan: ReconcilePlan
    reclaimed_paths: dict[str, set[str]] = field(default_factory=dict)
    # Paths that had left the manifest and lost rows (the moves gate's evidence).
    departed_paths: dict[str, set[str]] = field(default_factory=dict)


def _batches(ids: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    step = max(1, size)
    for start in range(0, len(ids), step):
        yield ids[start : start + step]


def _metadata_by_id(store: ChromaStore, ids: Sequence[str]) -> dict[str, dict[str, Any] | None]:
    """Each id's metadata as it is now (None when the row is gone)."""
    got = store.get_rows(list(ids))
    return {rid: (got[rid]["metadata"] if rid in got else None) for rid in ids}


def plan_containment(
    store: ChromaStore, tenant_id: str, ids: Sequence[str]
) -> tuple[dict[str, int], int]:
    """The plan's rows re-read by id and counted per tenantId (never taken from the
    classifier's report), and how many of them are not ``tenant_id``'s."""
    counts = count_by_tenant(_metadata_by_id(store, ids).values())
    return counts, foreign_count(tenant_id, counts)


def restamp_config_stale(
    store: ChromaStore, snap: TenantSnapshot, plan: ReconcilePlan, stale_gap: int, batch: int
) -> int:
    """Give the plan's config-stale rows the tenant's current tenantConfigVersion. Each
    batch is re-read and re-classified first: only rows that are still this tenant's,
    still declared and still config-stale are written, with their other stamps as read."""
    version = snap.declaration.config_version
    restamped = 0
    for ids in _batches(plan.restamp_ids, batch):
        current = _metadata_by_id(store, ids)
        rows = [{"id": rid, "metadata": md} for rid, md in current.items() if md is not None]
        fresh = classify_orphans(snap.declaration, rows, snap.present, snap.fenced, stale_gap)
        confirmed = [rid for rid in fresh.restamp_ids if rid in current]
        metas = [{**(current[rid] or {}), "tenantConfigVersion": version} for rid in confirmed]
        store.update_metadata(confirmed, metas)
        restamped += len(confirmed)
    return restamped


def _locate(
    declaration: TenantDeclaration, md: dict[str, Any] | None
) -> tuple[RepoDeclaration, str] | None:
    """The declared repo and the sourcePath a row's stamps place it on, if any."""
    if md is None:
        return None
    slug, path = md.get("repoSlug"), md.get("sourcePath")
    if type(slug) is not str or type(path) is not str:
        return None
    repo = declaration.repos.get(slug)
    return None if repo is None else (repo, path)


def _present_declared(
    store: ChromaStore,
    tenant_id: str,
    declaration: TenantDeclaration,
    metadatas: Sequence[dict[str, Any] | None],
) -> set[str]:
    """The declared ids of the paths these rows sit on that are present now as this
    tenant's rows: all the completeness gate of the re-verification needs (for a row of a
    path that left the manifest, the whole repo's: the moves gate asks for all of it)."""
    wanted: set[str] = set()
    whole: set[str] = set()
    for md in metadatas:
        place = _locate(declaration, md)
        if place is None:
            continue
        repo, path = place
        if path in repo.envelope_paths:
            wanted |= repo.declared_ids_by_path.get(path, frozenset())
        elif repo.repo_slug not in whole:
            whole.add(repo.repo_slug)
            for ids in repo.declared_ids_by_path.values():
                wanted |= ids
    got = store.get_rows(sorted(wanted))
    return {rid for rid, row in got.items() if row["metadata"].get("tenantId") == tenant_id}


@dataclass
class _Reclaim:
    by_kind: Counter[str] = field(default_factory=Counter)
    deleted: set[str] = field(default_factory=set)
    unconfirmed: int = 0
    batches: int = 0
    # Ids left for the next run because their repo's sweep lease was held throughout.
    lease_held: int = 0
    paths: dict[str, set[str]] = field(default_factory=dict)
    # Paths that had left the manifest (deleted, moved, renamed) and lost rows.
    departed: dict[str, set[str]] = field(default_factory=dict)


def _by_repo(slug_of: dict[str, Any], ids: Sequence[str]) -> dict[str, list[str]]:
    """A batch's ids grouped by the repoSlug their rows carried when read (``slug_of``)."""
    out: dict[str, list[str]] = {}
    for rid in ids:
        out.setdefault(str(slug_of.get(rid)), []).append(rid)
    return out


def _repo_lease(settings: Settings, ledger: Ledger, tenant_id: str, slug: str) -> LeaseKeeper:
    """The repo's sweep lease, held by this reconciliation for one reclaim batch, so a
    delete never interleaves with a sweep of the same repo."""
    return LeaseKeeper(
        ledger,
        sweep_lease_key(tenant_id, slug),
        f"reconcile:{holder_detail()}:{uuid.uuid4().hex[:12]}",
        ttl_s=settings.sweep.sweep_lease_ttl_s,
        wait_s=settings.reconcile.lease_wait_s,
        release_on_exit=True,
    )


def reclaim(
    settings: Settings,
    tenants: TenantsFile,
    store: ChromaStore,
    ledger: Ledger,
    snap: TenantSnapshot,
    plan: ReconcilePlan,
    log: Callable[[str], None] | None = None,
) -> _Reclaim:
    """Delete the plan's actionable ids in batches, each under its repo's sweep lease and
    re-verified, inside the lease, right before its delete."""
    tenant_id = snap.tenant_id
    expected = {
        rid: kind
        for kind in ORPHAN_KINDS
        if kind in ACTIONABLE_KINDS
        for rid in plan.ids_by_kind[kind]
    }
    declaration, marker = snap.declaration, snap.marker
    tenant = find_tenant(tenants, tenant_id)
    out = _Reclaim()
    deleting = set(plan.delete_ids)
    slug_of = {r["id"]: r["metadata"].get("repoSlug") for r in snap.rows if r["id"] in deleting}
    # Repo by repo, batches within each: one lease per batch, at most one batch per repo
    # more than batching all ids together.
    for slug, repo_ids in _by_repo(slug_of, plan.delete_ids).items():
        for ids in _batches(repo_ids, settings.reconcile.delete_batch):
            with _repo_lease(settings, ledger, tenant_id, slug) as lease:
                if not lease.held:
                    out.lease_held += len(ids)
                    out.unconfirmed += len(ids)
                    if log is not None:
                        log(f"{tenant_id}/{slug}: a sweep holds the lease; {len(ids)} ids wait")
                    continue
                current = _metadata_by_id(store, ids)
                now_marker = declaration_marker(ledger, tenant_id)
                if now_marker != marker:  # a sweep moved: judge against what it recorded
                    declaration, _problems, _records = read_declaration(ledger, tenant_id, tenant)
                    marker = now_marker
                fenced = durable_fenced_ids(ledger, tenant_id, declaration.repos, snap.generation)
                present = _present_declared(store, tenant_id, declaration, list(current.values()))
                confirmed = reverify_before_delete(
                    declaration,
                    {rid: expected[rid] for rid in ids},
                    current,
                    present,
                    fenced,
                    settings.reconcile.stale_gap,
                )
                try:
                    lease.check()  # still ours, right before the delete
                except LeaseLostError:
                    out.lease_held += len(ids)
                    out.unconfirmed += len(ids)
                    continue
                store.delete_ids(list(confirmed))
            out.batches += 1
            out.unconfirmed += len(ids) - len(confirmed)
            out.deleted.update(confirmed)
            for rid in confirmed:
                out.by_kind[expected[rid]] += 1
                place = _locate(declaration, current[rid])
                if place is None:
                    continue
                repo, path = place
                if path in repo.yielded_paths:
                    out.paths.setdefault(repo.repo_slug, set()).add(path)
                elif path not in repo.envelope_paths:
                    out.departed.setdefault(repo.repo_slug, set()).add(path)
            if log is not None:
                log(
                    f"{tenant_id}/{slug}: batch {out.batches}: deleted {len(confirmed)} "
                    f"of {len(ids)}"
                )
    return out


def retired_rows(
    found: Retired,
    tenant_id: str,
    before: Sequence[dict[str, Any]],
    after: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """What of this tenant is retired and its rows per repo, before and after the reclaim:
    ``{"tenant": bool, "repos": {slug: {"rows", "waiting"}}}`` (a retired tenant lists
    every repo its rows name)."""
    whole = tenant_id in found.tenants
    slugs = set(found.repos_of(tenant_id))

    def per_slug(rows: Sequence[dict[str, Any]]) -> Counter[str]:
        return Counter(
            str(row["metadata"].get("repoSlug"))
            for row in rows
            if whole or row["metadata"].get("repoSlug") in slugs
        )

    had, left = per_slug(before), per_slug(after)
    names = sorted(set(had) | (set() if whole else slugs))
    return {
        "tenant": whole,
        "repos": {slug: {"rows": had.get(slug, 0), "waiting": left.get(slug, 0)} for slug in names},
    }


def _plan_counts(plan: ReconcilePlan, done: _Reclaim, restamped: int) -> dict[str, Any]:
    """The report's figures of the plan (its telemetry) and of what was done with it."""
    return {
        **plan.telemetry(examples=REPORT_MAX_IDS),
        "restamped": restamped,
        "reclaimed": sum(done.by_kind.values()),
        "reclaimedByKind": {kind: done.by_kind.get(kind, 0) for kind in ORPHAN_KINDS},
        "unconfirmed": done.unconfirmed,
        "leaseHeld": done.lease_held,
        "deleteBatches": done.batches,
    }


def reconcile_tenant(
    settings: Settings,
    tenants: TenantsFile,
    tenant_id: str,
    store: ChromaStore,
    ledger: Ledger,
    *,
    write: bool,
    log: Callable[[str], None] | None = None,
) -> ReconcileOutcome:
    """Classify (always); re-stamp when ``write``; reclaim when ``write`` and the setting
    is on and the plan passed both pre-delete checks. Returns the report."""
    started = time.perf_counter()
    base = store
    # Orphans are judged in the configured generation's collection; other generations
    # are reclaimed whole, per tenant, once the tenant no longer uses them (below).
    store = generation_store(settings, ledger, base, configured_generation(settings))
    snap = read_snapshot(settings, tenants, tenant_id, store, ledger)
    read_s = time.perf_counter() - started
    gap = settings.reconcile.stale_gap
    plan = classify_orphans(snap.declaration, snap.rows, snap.present, snap.fenced, gap)
    plan_holes = plan_keeps_complete_sets(
        plan, snap.declaration, snap.rows, snap.present, snap.fenced
    )
    plan_counts, plan_foreign = plan_containment(store, tenant_id, plan.delete_ids)
    classify_s = time.perf_counter() - started - read_s

    restamped = 0
    if write and plan.restamp_ids:
        restamped = restamp_config_stale(store, snap, plan, gap, settings.reconcile.delete_batch)
    blocked = reclaim_blocked(
        write=write,
        enabled=settings.reconcile.enabled,
        plan_holes=len(plan_holes),
        plan_foreign_rows=plan_foreign,
        actionable=len(plan.delete_ids),
    )
    done = _Reclaim()
    if blocked is None:
        done = reclaim(settings, tenants, store, ledger, snap, plan, log)
    # Other generations' collections, reclaimed whole once the tenant no longer uses them.
    declared = find_tenant(tenants, tenant_id)
    slugs = [r.slug for r in declared.repos] if declared is not None else []
    batch = settings.reconcile.delete_batch
    old_generations = reclaim_generations(
        settings, tenant_id, slugs, base, ledger, write=write, batch=batch
    )
    remaining = [row for row in snap.rows if row["id"] not in done.deleted]
    residue_now = residue(snap.declaration, remaining, REPORT_MAX_IDS)
    retired_now = retired_rows(read_retired(ledger, tenants), tenant_id, snap.rows, remaining)
    report: dict[str, Any] = {
        "tenantId": tenant_id,
        "declared": declared is not None,
        "enabled": settings.reconcile.enabled,
        "write": write,
        "reclaimBlocked": blocked,
        "configVersion": snap.declaration.config_version,
        "embeddingGeneration": snap.generation,
        "generations": old_generations,
        "rows": len(snap.rows),
        **_plan_counts(plan, done, restamped),
        "planHoles": {"count": len(plan_holes), "ids": plan_holes[:REPORT_MAX_IDS]},
        "planRowsByTenant": plan_counts,
        "planForeignRows": plan_foreign,
        "retired": retired_now,
        "residueShare": residue_now.share,
        "residueRows": residue_now.residue_rows,
        "repos": {
            slug: {"authority": "ok" if problem is None else problem}
            for slug, problem in sorted(snap.authority.items())
        },
        "seconds": {
            "read": round(read_s, 4),
            "classify": round(classify_s, 4),
            "total": round(time.perf_counter() - started, 4),
        },
    }
    return ReconcileOutcome(
        report=report, plan=plan, reclaimed_paths=done.paths, departed_paths=done.departed
    )
