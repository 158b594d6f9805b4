"""The rules behind reconciliation's asset checks: no hole, tenant containment, residue.
Pure; each names its offenders (``"repoSlug:sourcePath"`` or row ids).
Design: docs/design/reconcile.md#checks"""

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from neo_assets.reconcile.rules.declaration import (
    RepoDeclaration,
    TenantDeclaration,
    generation_complete,
)
from neo_assets.reconcile.rules.retirement import (
    RETIRED_KINDS,
    RETIRED_REPO,
    Retired,
    scope_label,
)

# The contract's id pattern (tenants.yaml): a tenantId that does not match is no tenant's.
_TENANT_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,62}", re.ASCII)
# Counting key for a row without a readable tenantId.
UNSTAMPED_TENANT = "<unstamped>"

CONTAINMENT_UNSTAMPED_TENANT = "unstamped-tenant"
CONTAINMENT_UNDECLARED_TENANT = "undeclared-tenant"
CONTAINMENT_UNOWNED_REPO = "unowned-repo"
CONTAINMENT_REASONS = (
    CONTAINMENT_UNSTAMPED_TENANT,
    CONTAINMENT_UNDECLARED_TENANT,
    CONTAINMENT_UNOWNED_REPO,
)
DEFAULT_EXAMPLES = 20


def path_label(repo_slug: str, source_path: str) -> str:
    return f"{repo_slug}:{source_path}"


# ---------------------------------------------------------------------------- no hole
@dataclass(frozen=True)
class Wholeness:
    """Yielded paths of one repo by state; the named ones are sorted ``slug:path`` labels."""

    complete: int
    held: tuple[str, ...]
    in_flight: tuple[str, ...]
    holes: tuple[str, ...]


def path_wholeness(
    repo: RepoDeclaration,
    row_ids_by_path: Mapping[str, Set[str]],
    present_ids: Set[str],
    fenced_ids: Set[str],
    *,
    settled: bool,
    reclaimed_paths: Set[str] = frozenset(),
) -> Wholeness:
    """Judge every yielded path of ``repo`` (docs/design/reconcile.md#checks).
    ``row_ids_by_path``: the tenant's row ids of this repo by sourcePath;
    ``reclaimed_paths``: those this reconciliation deleted rows from. A repo without a
    complete envelope has no known yielded path, so nothing of it is judged."""
    if not repo.has_complete_envelope:
        return Wholeness(0, (), (), ())
    complete = 0
    held: list[str] = []
    in_flight: list[str] = []
    holes: list[str] = []
    for path in sorted(repo.yielded_paths):
        declared = repo.declared_ids_by_path.get(path)
        label = path_label(repo.repo_slug, path)
        if declared is not None and all(i in present_ids or i in fenced_ids for i in declared):
            complete += 1
        elif path in reclaimed_paths:
            holes.append(label)
        elif row_ids_by_path.get(path, frozenset()) - (declared or frozenset()):
            held.append(label)
        elif settled:
            holes.append(label)
        else:
            in_flight.append(label)
    return Wholeness(complete, tuple(held), tuple(in_flight), tuple(holes))


def departed_holes(
    repo: RepoDeclaration,
    departed_paths: Set[str],
    present_ids: Set[str],
    fenced_ids: Set[str],
) -> tuple[str, ...]:
    """Content-keyed no hole for moves: rows of paths that had left the manifest (deleted,
    moved, renamed) were removed by this reconciliation, so the repo's declared generation
    must be complete now (a moved file's content is held by its new path); else each such
    path is a hole, sorted ``slug:path`` labels."""
    if not departed_paths or generation_complete(repo, present_ids, fenced_ids):
        return ()
    return tuple(path_label(repo.repo_slug, path) for path in sorted(departed_paths))


def row_ids_by_path(
    rows: Iterable[Mapping[str, Any]], tenant_id: str, repo_slug: str
) -> dict[str, set[str]]:
    """The tenant's row ids of one repo grouped by sourcePath (rows whose stamps cannot
    place them are left out: they hold no path)."""
    out: dict[str, set[str]] = {}
    for row in rows:
        md = row.get("metadata")
        rid = row.get("id")
        if not isinstance(md, Mapping) or type(rid) is not str:
            continue
        if md.get("tenantId") != tenant_id or md.get("repoSlug") != repo_slug:
            continue
        path = md.get("sourcePath")
        if type(path) is str and path:
            out.setdefault(path, set()).add(rid)
    return out


# ---------------------------------------------------------------------------- containment
def tenant_key(metadata: Mapping[str, Any] | None) -> str:
    """The tenantId a row is counted under (UNSTAMPED_TENANT when it has none)."""
    tid = metadata.get("tenantId") if isinstance(metadata, Mapping) else None
    return tid if type(tid) is str and tid else UNSTAMPED_TENANT


def count_by_tenant(metadatas: Iterable[Mapping[str, Any] | None]) -> dict[str, int]:
    """Rows per tenantId, sorted by tenant (a missing row, None, is not counted)."""
    counts = Counter(tenant_key(md) for md in metadatas if md is not None)
    return dict(sorted(counts.items()))


def foreign_count(tenant_id: str, counts: Mapping[str, int]) -> int:
    """How many of the counted rows are not ``tenant_id``'s."""
    return sum(n for tid, n in counts.items() if tid != tenant_id)


@dataclass(frozen=True)
class Containment:
    """Every row of the collection counted per tenantId, and the containment violations per
    reason (a count, a few sorted ids and ``slug:path`` labels). Retired rows of the focus
    tenant are counted apart (``retired``); other tenants' only in ``others_retired``."""

    rows_by_tenant: dict[str, int]
    violations: dict[str, int]
    examples: dict[str, tuple[str, ...]]
    example_paths: dict[str, tuple[str, ...]] = field(default_factory=dict)
    retired: dict[str, int] = field(default_factory=dict)
    retired_examples: dict[str, tuple[str, ...]] = field(default_factory=dict)
    retired_paths: dict[str, tuple[str, ...]] = field(default_factory=dict)
    retired_by_scope: dict[str, int] = field(default_factory=dict)
    others_retired: int = 0

    @property
    def violating_rows(self) -> int:
        return sum(self.violations.values())

    @property
    def retired_rows(self) -> int:
        return sum(self.retired.values())


def _row_label(md: Mapping[str, Any]) -> str | None:
    slug, path = md.get("repoSlug"), md.get("sourcePath")
    if type(slug) is str and type(path) is str:
        return path_label(slug, path)
    return None


def containment(
    rows: Iterable[Mapping[str, Any]],
    owners: Mapping[str, Set[str]],
    examples: int = DEFAULT_EXAMPLES,
    *,
    retired: Retired = Retired(),
    focus: str | None = None,
) -> Containment:
    """Judge every row against ``owners`` (declared tenantId -> its declared repo slugs)
    and ``retired``; ``focus`` is the tenant whose check this is (None: every tenant's
    retired rows are counted as the focus's)."""
    by_tenant: Counter[str] = Counter()
    # Per containment reason and per retired kind: the rows' ids and ``slug:path`` labels.
    ids: dict[str, list[str]] = {key: [] for key in (*CONTAINMENT_REASONS, *RETIRED_KINDS)}
    paths: dict[str, set[str]] = {key: set() for key in ids}
    scopes: Counter[str] = Counter()
    others = 0
    for row in rows:
        md = row.get("metadata")
        md = md if isinstance(md, Mapping) else {}
        rid = row.get("id")
        tid = md.get("tenantId")
        by_tenant[tenant_key(md)] += 1
        if type(tid) is not str or _TENANT_ID.fullmatch(tid) is None:
            key = CONTAINMENT_UNSTAMPED_TENANT
        elif (tid not in owners or md.get("repoSlug") not in owners[tid]) and (
            kind := retired.kind(tid, md.get("repoSlug"))
        ):
            if focus is not None and tid != focus:
                others += 1
                continue
            key = kind
            slug = str(md.get("repoSlug")) if kind == RETIRED_REPO else None
            scopes[scope_label(tid, slug)] += 1
        elif tid not in owners:
            key = CONTAINMENT_UNDECLARED_TENANT
        elif md.get("repoSlug") not in owners[tid]:
            key = CONTAINMENT_UNOWNED_REPO
        else:
            continue
        ids[key].append(rid if type(rid) is str else repr(rid))
        where = _row_label(md)
        if where is not None:
            paths[key].add(where)

    def firsts(found: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted(found)[:examples])

    return Containment(
        rows_by_tenant=dict(sorted(by_tenant.items())),
        violations={reason: len(ids[reason]) for reason in CONTAINMENT_REASONS},
        examples={reason: firsts(ids[reason]) for reason in CONTAINMENT_REASONS},
        example_paths={reason: firsts(paths[reason]) for reason in CONTAINMENT_REASONS},
        retired={kind: len(ids[kind]) for kind in RETIRED_KINDS},
        retired_examples={kind: firsts(ids[kind]) for kind in RETIRED_KINDS},
        retired_paths={kind: firsts(paths[kind]) for kind in RETIRED_KINDS},
        retired_by_scope=dict(sorted(scopes.items())),
        others_retired=others,
    )


# ---------------------------------------------------------------------------- residue
def residue_share(tenant: TenantDeclaration, rows: Iterable[Mapping[str, Any]]) -> float:
    """``residue(...).share``: the share of residue rows among the parser-stamped ones."""
    return residue(tenant, list(rows)).share


@dataclass(frozen=True)
class Residue:
    """The share of the tenant's parser-stamped rows that are residue, those rows counted
    per ``"repoSlug parserId@parserVersion"``, and a few example ids."""

    share: float
    residue_rows: int
    stamped_rows: int
    by_pair: dict[str, int]
    examples: tuple[str, ...]


def residue(
    tenant: TenantDeclaration, rows: list[Mapping[str, Any]], examples: int = DEFAULT_EXAMPLES
) -> Residue:
    """The tenant's generation residue: its parser-stamped rows whose ``{parserId,
    parserVersion}`` is not their repo's declared pair (rows of an undeclared repo count as
    residue: no declaration stands behind them). Foreign rows and rows without both stamps
    (or a repoSlug) are in neither numerator nor denominator; the share is 0.0 when no row
    qualifies."""
    by_pair: Counter[str] = Counter()
    ids: list[str] = []
    stamped = 0
    for row in rows:
        md = row.get("metadata") if isinstance(row, Mapping) else None
        if not isinstance(md, Mapping) or md.get("tenantId") != tenant.tenant_id:
            continue
        slug, pid, pver = md.get("repoSlug"), md.get("parserId"), md.get("parserVersion")
        if type(slug) is not str or type(pid) is not str or type(pver) is not str:
            continue
        stamped += 1
        repo = tenant.repos.get(slug)
        if repo is None or pid != repo.parser_id or pver != repo.parser_version:
            by_pair[f"{slug} {pid}@{pver}"] += 1
            rid = row.get("id")
            if type(rid) is str:
                ids.append(rid)
    residue_rows = sum(by_pair.values())
    return Residue(
        share=residue_rows / stamped if stamped else 0.0,
        residue_rows=residue_rows,
        stamped_rows=stamped,
        by_pair=dict(sorted(by_pair.items())),
        examples=tuple(sorted(ids)[:examples]),
    )
