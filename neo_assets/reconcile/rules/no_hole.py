"""The checks a reclaim plan passes before the shell deletes anything: the plan leaves no
hole (``plan_keeps_complete_sets``, independent of the classifier that made the plan), and
each row to delete, re-read right before its batch, is still the same actionable orphan
(``reverify_before_delete``)."""

from collections.abc import Iterable, Mapping, Set
from typing import Any

from neo_assets.reconcile.rules.declaration import TenantDeclaration, generation_complete
from neo_assets.reconcile.rules.orphans import (
    DEFAULT_STALE_GAP,
    STAMP_REPO_SLUG,
    STAMP_SOURCE_PATH,
    STAMP_TENANT_ID,
    classify_orphans,
)
from neo_assets.reconcile.rules.plan import ACTIONABLE_KINDS, ReconcilePlan


def plan_keeps_complete_sets(
    plan: ReconcilePlan,
    tenant: TenantDeclaration,
    rows: Iterable[Mapping[str, Any]],
    present_ids: Set[str],
    fenced_ids: Set[str],
) -> list[str]:
    """The no-hole check on a plan, independent of the classifier that made it: the sorted
    ``"repoSlug:sourcePath"`` paths it would leave without a complete set (empty = safe),
    plus deleted rows whose membership is unknown or ``"unlocatable:<id>"``.
    Design: docs/design/reconcile.md#checks"""
    deleting = frozenset(plan.delete_ids)
    if not deleting:
        return []
    tenant_id = tenant.tenant_id
    touched: set[tuple[str, str]] = set()
    departed: set[tuple[str, str]] = set()
    offenders: set[str] = set()
    for row in rows:
        try:
            rid = row["id"]
        except (KeyError, TypeError):
            continue
        if type(rid) is not str or rid not in deleting:
            continue
        md = row.get("metadata")
        if not isinstance(md, Mapping) or md.get(STAMP_TENANT_ID) != tenant_id:
            continue  # containment is the other check's business
        slug = md.get(STAMP_REPO_SLUG)
        if type(slug) is not str:
            offenders.add(f"unlocatable:{rid}")
            continue
        repo = tenant.repos.get(slug)
        if repo is None:
            continue  # an undeclared repo yields no path, so it has no set to keep
        path = md.get(STAMP_SOURCE_PATH)
        if type(path) is not str:
            offenders.add(f"unlocatable:{rid}")
        elif not repo.has_complete_envelope:
            offenders.add(f"{slug}:{path}")
        elif path in repo.yielded_paths:
            touched.add((slug, path))
        elif path not in repo.envelope_paths:
            departed.add((slug, path))
    # A path that left the manifest may have moved: its rows go only once the repo's
    # declared generation is complete after the plan (the moved content's rows exist).
    after = frozenset(present_ids) - deleting
    for slug, path in departed:
        if not generation_complete(tenant.repos[slug], after, fenced_ids):
            offenders.add(f"{slug}:{path}")
    for slug, repo in tenant.repos.items():
        for path, ids in repo.declared_ids_by_path.items():
            if not deleting.isdisjoint(ids):
                touched.add((slug, path))
    for slug, path in touched:
        declared = tenant.repos[slug].declared_ids_by_path.get(path)
        complete_after = declared is not None and all(
            (i in present_ids and i not in deleting) or i in fenced_ids for i in declared
        )
        if not complete_after:
            offenders.add(f"{slug}:{path}")
    return sorted(offenders)


def reverify_before_delete(
    tenant: TenantDeclaration,
    expected_kinds: Mapping[str, str],
    reread_metadata: Mapping[str, Mapping[str, Any] | None],
    present_ids: Set[str],
    fenced_ids: Set[str],
    stale_gap: int = DEFAULT_STALE_GAP,
) -> tuple[str, ...]:
    """Of the ids the plan would delete, those that still may be, judged right before the batch:
    re-read now, still this tenant's, and classified into the same kind against the current
    declaration and present/fenced ids."""
    rows = [
        {"id": rid, "metadata": md}
        for rid, md in reread_metadata.items()
        if rid in expected_kinds and md is not None
    ]
    fresh = classify_orphans(tenant, rows, present_ids, fenced_ids, stale_gap)
    confirmed = [
        rid
        for kind, ids in fresh.ids_by_kind.items()
        if kind in ACTIONABLE_KINDS
        for rid in ids
        if expected_kinds.get(rid) == kind
        and reread_metadata[rid].get(STAMP_TENANT_ID) == tenant.tenant_id
    ]
    return tuple(sorted(confirmed))
