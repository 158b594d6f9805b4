"""Evaluate reconciliation's three checks for one tenant, over the state as it is now, as
plain ``CheckOutcome``s (offenders bounded under ``offending_*`` keys, so an alert names
them). The rules: ``neo_assets.reconcile.rules.checks``."""

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from neo_assets.config.settings import Settings
from neo_assets.core.ids.stamps import tenant_filter
from neo_assets.generations.serving import configured_generation, generation_store
from neo_assets.reconcile.reading import read_snapshot
from neo_assets.reconcile.retirement import declared_owners, read_retired
from neo_assets.reconcile.rules.checks import (
    CONTAINMENT_REASONS,
    containment,
    count_by_tenant,
    departed_holes,
    foreign_count,
    path_wholeness,
    residue,
    row_ids_by_path,
)
from neo_assets.reconcile.rules.retirement import RETIRED_KINDS
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger
from neo_assets.tenants.validation import TenantsFile

MAX_NAMED = 20
# Results asked of the tenant-scoped probe query.
PROBE_QUERY_K = 50


@dataclass(frozen=True)
class CheckOutcome:
    passed: bool
    metadata: dict[str, Any]
    summary: str
    # Not passed, yet no breach: something the operator should act on (WARN, not ERROR).
    warn: bool = False


def _named(items: Iterable[str]) -> dict[str, Any]:
    listed = sorted(items)
    return {"count": len(listed), "ids": listed[:MAX_NAMED]}


def _md_list(title: str, items: list[str]) -> str:
    if not items:
        return ""
    shown = "\n".join(f"- `{item}`" for item in items[:MAX_NAMED])
    more = f"\n- …and {len(items) - MAX_NAMED} more" if len(items) > MAX_NAMED else ""
    return f"\n\n{title}:\n\n{shown}{more}"


def no_hole(
    settings: Settings,
    tenants: TenantsFile,
    tenant_id: str,
    store: ChromaStore,
    ledger: Ledger,
    reclaimed_paths: Mapping[str, Iterable[str]],
    plan_holes: Mapping[str, Any] | None = None,
    departed_paths: Mapping[str, Iterable[str]] | None = None,
) -> CheckOutcome:
    """The no-hole check (docs/design/reconcile.md#checks), judged in the configured
    generation's collection: ``departed_paths`` left the manifest and lost rows in this run;
    ``plan_holes`` is what ``plan_keeps_complete_sets`` returned for the executed plan."""
    store = generation_store(settings, ledger, store, configured_generation(settings))
    snap = read_snapshot(settings, tenants, tenant_id, store, ledger)
    holes: list[str] = []
    in_flight: list[str] = []
    held: list[str] = []
    complete = 0
    repos: dict[str, Any] = {}
    for slug, repo in sorted(snap.declaration.repos.items()):
        judged = path_wholeness(
            repo,
            row_ids_by_path(snap.rows, tenant_id, slug),
            snap.present,
            snap.fenced,
            settled=snap.settled(ledger, slug),
            reclaimed_paths=frozenset(reclaimed_paths.get(slug, ())),
        )
        moved = departed_holes(
            repo, frozenset((departed_paths or {}).get(slug, ())), snap.present, snap.fenced
        )
        holes += judged.holes + moved
        in_flight += judged.in_flight
        held += judged.held
        complete += judged.complete
        repos[slug] = {
            "authority": snap.authority.get(slug) or "ok",
            "complete": judged.complete,
            "held": len(judged.held),
            "inFlight": len(judged.in_flight),
            "holes": len(judged.holes) + len(moved),
            "departedHoles": len(moved),
        }
    plan_offenders = sorted((plan_holes or {}).get("ids", []))
    plan_hole_count = int((plan_holes or {}).get("count", len(plan_offenders)))
    passed = not holes and plan_hole_count == 0
    summary = (
        f"**{tenant_id}**: {complete} yielded paths complete, {len(held)} held by an earlier "
        f"generation, {len(in_flight)} in flight, **{len(holes)} holes**; the executed plan "
        f"named {plan_hole_count} hole-opening paths."
        + _md_list("Holes (no complete set)", holes)
        + _md_list("Plan paths that would lose their last complete set", plan_offenders)
    )
    return CheckOutcome(
        passed=passed,
        metadata={
            "offending_paths": _named(holes),
            "offending_plan_paths": {"count": plan_hole_count, "ids": plan_offenders[:MAX_NAMED]},
            "holes": len(holes),
            "complete_paths": complete,
            "held_paths": len(held),
            "in_flight_paths": len(in_flight),
            "in_flight": _named(in_flight),
            "repos": repos,
        },
        summary=summary,
    )


def _probe_query(store: ChromaStore, tenant_id: str) -> dict[str, int] | None:
    """Rows per tenantId of a tenant-scoped query, probed with one of the tenant's own
    embeddings (so the dimension matches); None when the tenant has no row."""
    got = store.collection.get(where=tenant_filter(tenant_id), limit=1, include=["embeddings"])
    embeddings = got.get("embeddings")
    if embeddings is None or len(embeddings) == 0:
        return None
    hits = store.query(
        np.asarray(embeddings[0], dtype=np.float32), where=tenant_filter(tenant_id), k=PROBE_QUERY_K
    )
    return count_by_tenant(hit["metadata"] for hit in hits)


def tenant_containment(
    tenants: TenantsFile,
    tenant_id: str,
    store: ChromaStore,
    plan_rows_by_tenant: Mapping[str, int] | None,
    ledger: Ledger,
) -> CheckOutcome:
    """Every row of the collection is a declared tenant's, in a repo that tenant declares,
    or a retired tenant's or repo's (reported apart, WARN, on its own tenant's check only);
    the executed plan's rows (re-read by id before the delete, counted per tenantId) are
    all this tenant's; a tenant-scoped query returns only this tenant's rows."""
    found = read_retired(ledger, tenants)
    # Every generation's collection: containment holds in each of them.
    generations = store.generation_siblings()
    rows = (row for generation in generations for row in generation.iter_rows(None))
    judged = containment(rows, declared_owners(tenants), MAX_NAMED, retired=found, focus=tenant_id)
    plan_counts = dict(plan_rows_by_tenant or {})
    plan_foreign = foreign_count(tenant_id, plan_counts)
    query_counts: dict[str, int] | None = None
    for generation in generations:
        counts = _probe_query(generation, tenant_id)
        if counts is not None:
            query_counts = dict(Counter(query_counts or {}) + Counter(counts))
    query_foreign = foreign_count(tenant_id, query_counts or {})
    offending = sorted({rid for ids in judged.examples.values() for rid in ids})
    offending_paths = {p for paths in judged.example_paths.values() for p in paths}
    breach = judged.violating_rows != 0 or plan_foreign != 0 or query_foreign != 0
    lines = [
        f"**{tenant_id}**: {sum(judged.rows_by_tenant.values())} rows in the collection, "
        f"**{judged.violating_rows}** violating containment; the executed plan held "
        f"{plan_foreign} rows of another tenant; a tenant-scoped query returned "
        f"{query_foreign} rows of another tenant."
    ]
    for reason in CONTAINMENT_REASONS:
        if judged.violations[reason]:
            lines.append(
                _md_list(f"{reason} ({judged.violations[reason]})", list(judged.examples[reason]))
            )
            lines.append(_md_list(f"{reason} paths", list(judged.example_paths[reason])))
    if judged.retired_rows:
        waiting = ", ".join(f"`{scope}` {n} rows" for scope, n in judged.retired_by_scope.items())
        lines.append(
            f"\n\n**Retired, not a breach**: {waiting} wait for reclamation (they left "
            "tenants.yaml; queries no longer serve them; a reconciliation with "
            "NEO_RECONCILIATION_ENABLED=true reclaims them, re-declaring keeps them)."
        )
        for kind in RETIRED_KINDS:
            lines.append(_md_list(f"{kind} paths", list(judged.retired_paths[kind])))
    return CheckOutcome(
        passed=not breach and judged.retired_rows == 0,
        warn=not breach and judged.retired_rows > 0,
        metadata={
            "offending_ids": {"count": judged.violating_rows, "ids": offending[:MAX_NAMED]},
            "offending_paths": _named(offending_paths),
            "violations": judged.violations,
            "violating_rows": judged.violating_rows,
            "retired": judged.retired,
            "retired_rows": judged.retired_rows,
            "retired_by_scope": judged.retired_by_scope,
            "retired_paths": {k: list(v) for k, v in judged.retired_paths.items() if v},
            # What an alert lists when only retired rows are reported (paths, not ids).
            "offending_retired_paths": sorted(
                {p for paths in judged.retired_paths.values() for p in paths}
            )[:MAX_NAMED],
            "other_tenants_retired_rows": judged.others_retired,
            "rows_by_tenant": judged.rows_by_tenant,
            "plan_rows_by_tenant": plan_counts,
            "plan_foreign_rows": plan_foreign,
            "query_rows_by_tenant": query_counts or {},
            "query_foreign_rows": query_foreign,
        },
        summary="".join(lines),
    )


def generation_residue(
    settings: Settings, tenants: TenantsFile, tenant_id: str, store: ChromaStore, ledger: Ledger
) -> CheckOutcome:
    """The share of the tenant's rows with a parser identity other than their repo's
    declared one: zero passes; anything else is a backlog to watch shrink (WARN)."""
    store = generation_store(settings, ledger, store, configured_generation(settings))
    snap = read_snapshot(settings, tenants, tenant_id, store, ledger)
    found = residue(snap.declaration, snap.rows, MAX_NAMED)
    table = "\n".join(f"| {pair} | {n} |" for pair, n in found.by_pair.items())
    summary = (
        f"**{tenant_id}**: residue share **{found.share:.2%}** ({found.residue_rows} of "
        f"{found.stamped_rows} parser-stamped rows carry a non-declared parser identity)."
        + (f"\n\n| repo and parser | rows |\n| --- | --- |\n{table}" if table else "")
    )
    return CheckOutcome(
        passed=found.residue_rows == 0,
        metadata={
            "residue_share": float(found.share),
            "residue_rows": found.residue_rows,
            "stamped_rows": found.stamped_rows,
            "by_pair": found.by_pair,
            "offending_ids": {"count": found.residue_rows, "ids": list(found.examples)},
        },
        summary=summary,
    )
