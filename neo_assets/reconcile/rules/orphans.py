"""Orphan classification for one tenant: which rows reconciliation may reclaim, and when.
Pure; every row lands in at most one kind, by precedence (containment, repo, path
membership, declared id, undeclared id), and no declared id is ever in an actionable kind.
Design: docs/design/reconcile.md#orphans"""

import math
from collections.abc import Iterable, Mapping, Set
from itertools import chain
from operator import itemgetter
from typing import Any

from neo_assets.core.codes import (
    KIND_CONFIG_STALE,
    KIND_MANIFEST_ORPHAN,
    KIND_MANIFEST_ORPHAN_PENDING,
    KIND_STALE_CONTENT,
    KIND_STALE_CONTENT_PENDING,
    KIND_SUPERSEDED_GENERATION,
    KIND_SUPERSEDED_PENDING,
    KIND_UNDECLARED_REPO,
    KIND_UNYIELDED_PATH,
)
from neo_assets.reconcile.rules.declaration import (
    RepoDeclaration,
    TenantDeclaration,
    generation_complete,
    replacement_complete,
)
from neo_assets.reconcile.rules.plan import (
    ACTIONABLE_KINDS,
    ORPHAN_KINDS,
    PENDING_KINDS,
    ReconcilePlan,
)

# Mirrors settings.reconcile.stale_gap's default; the shell passes the setting.
DEFAULT_STALE_GAP = 2

# Stamp names as the contract spells them (and the pseudo-stamps a row's shape needs).
STAMP_ID = "id"
STAMP_METADATA = "metadata"
STAMP_TENANT_ID = "tenantId"
STAMP_REPO_SLUG = "repoSlug"
STAMP_SOURCE_PATH = "sourcePath"
STAMP_PARSER_ID = "parserId"
STAMP_PARSER_VERSION = "parserVersion"
STAMP_TENANT_CONFIG_VERSION = "tenantConfigVersion"
STAMP_INGESTED_AT = "ingestedAt"


_UNYIELDED = object()  # path-table marker: in the envelope, not yielded
_ABSENT = object()  # lookup miss: not in the envelope / repo not declared
_GET_ID = itemgetter("id")
_ROW_STAMPS = frozenset(
    {
        STAMP_ID,
        STAMP_METADATA,
        STAMP_TENANT_ID,
        STAMP_REPO_SLUG,
        STAMP_SOURCE_PATH,
        STAMP_PARSER_ID,
        STAMP_PARSER_VERSION,
        STAMP_TENANT_CONFIG_VERSION,
        STAMP_INGESTED_AT,
    }
)


def _is_finite_time(value: object) -> bool:
    return (type(value) is float or type(value) is int) and math.isfinite(value)


def _is_stamp_str(value: object) -> bool:
    return type(value) is str and value != ""


def _skip(skipped: dict[str, int], stamp: str) -> None:
    skipped[stamp] = skipped.get(stamp, 0) + 1


def _declared_among(tenant: TenantDeclaration, candidates: list[list[Any]]) -> set[Any]:
    """The candidate ids that the tenant declares anywhere (the last guard:
    docs/design/reconcile.md#orphans), one C-level disjointness test per declared path."""
    pool = set(chain.from_iterable(candidates))
    found: set[Any] = set()
    if pool:
        for repo in tenant.repos.values():
            for ids in repo.declared_ids_by_path.values():
                if not pool.isdisjoint(ids):
                    found |= pool & ids
    return found


def _path_table(repo: RepoDeclaration) -> dict[str, Any]:
    """path -> its declared id set (yielded, generation recorded), None (yielded, not
    recorded) or _UNYIELDED; a path of no envelope is absent. One lookup per row."""
    table: dict[str, Any] = dict.fromkeys(repo.envelope_paths, _UNYIELDED)
    table.update(dict.fromkeys(repo.yielded_paths))
    table.update(repo.declared_ids_by_path)
    return table


def _first_occurrences(rows: list[Any]) -> tuple[list[Any], int, set[Any], int]:
    """The slow prepass, run only when the fast one saw an anomaly: drops the rows whose id
    is absent or unhashable (returned as a count) and repeated ids (counted; returned)."""
    kept: list[Any] = []
    seen: set[Any] = set()
    duplicated: set[Any] = set()
    bad_ids = duplicates = 0
    for row in rows:
        try:
            rid = row[STAMP_ID]
            repeated = rid in seen
        except (KeyError, TypeError):
            bad_ids += 1
            continue
        if repeated:
            duplicates += 1
            duplicated.add(rid)
        else:
            seen.add(rid)
            kept.append(row)
    return kept, bad_ids, duplicated, duplicates


def _sorted_ids(ids: list[Any]) -> tuple[list[str], int]:
    """Sort a kind's ids in place and drop any that is not a non-empty str (returned as a
    count). The sort is the check: it raises on a str mixed with another built-in type, so
    once it succeeds the ends tell (``""`` sorts first; a list of no str has no str end)."""
    try:
        ids.sort()
        if not ids or (type(ids[0]) is str and ids[0] and type(ids[-1]) is str):
            return ids, 0
    except TypeError:
        pass
    good = sorted(i for i in ids if type(i) is str and i)
    return good, len(ids) - len(good)


def _type_error_stamp(row: Mapping[str, Any]) -> str:
    """Which stamp made the hot loop raise TypeError: the metadata is not a mapping, or a
    stamp used as a lookup key is unhashable (the loop reads repoSlug before sourcePath)."""
    try:
        md = row[STAMP_METADATA]
    except (KeyError, TypeError):
        return STAMP_METADATA
    if not isinstance(md, Mapping):
        return STAMP_METADATA
    if not _is_stamp_str(md.get(STAMP_REPO_SLUG)):
        return STAMP_REPO_SLUG
    return STAMP_SOURCE_PATH


def _unique_rows(rows: list[Any]) -> tuple[list[Any], dict[str, int], set[Any], int]:
    """The rows the loop sorts, the skips so far, the repeated ids and their extra reads. When no
    id is missing or repeated, the loop needs no per-row id bookkeeping."""
    try:
        clean = len(set(map(_GET_ID, rows))) == len(rows)
    except (KeyError, TypeError):
        clean = False
    if clean:
        return rows, {}, set(), 0
    kept, bad_ids, duplicated, duplicates = _first_occurrences(rows)
    return kept, ({STAMP_ID: bad_ids} if bad_ids else {}), duplicated, duplicates


def _repo_views(tenant: TenantDeclaration) -> dict[str, tuple[Any, ...] | None]:
    """Per declared repo: (path table, parserId, parserVersion, recorded_at, per-path
    target lists, filled lazily, held parser); None for a repo without a complete
    envelope."""
    return {
        slug: (
            (
                _path_table(repo),
                repo.parser_id,
                repo.parser_version,
                repo.envelope_recorded_at,
                {},
                repo.held_parser,
            )
            if repo.has_complete_envelope
            else None
        )
        for slug, repo in tenant.repos.items()
    }


class _Sorting:
    """One classification under way: what it reads, the ids found per kind and the
    counters. The hot loop (``_sort_rows``) binds what it needs to locals; the outcomes it
    meets less often are these methods, so they cost a call only when they happen."""

    __slots__ = (
        "tenant",
        "present_ids",
        "fenced_ids",
        "stale_limit",
        "views",
        "whole_repo",
        "by_kind",
        "skipped",
        "foreign",
        "newer",
        "no_envelope",
    )

    def __init__(
        self,
        tenant: TenantDeclaration,
        present_ids: Set[str],
        fenced_ids: Set[str],
        stale_limit: int,
        skipped: dict[str, int],
    ) -> None:
        self.tenant = tenant
        self.present_ids = present_ids
        self.fenced_ids = fenced_ids
        self.stale_limit = stale_limit  # a row is config-stale when its version <= this
        self.views = _repo_views(tenant)
        self.whole_repo: dict[str, bool] = {}  # per slug, once: the moves gate
        self.by_kind: dict[str, list[Any]] = {kind: [] for kind in ORPHAN_KINDS}
        self.skipped = skipped
        self.foreign = self.newer = self.no_envelope = 0

    def other_tenant(self, tenant_id: object) -> None:
        """Containment: another tenant's row is only counted; one of no tenant is skipped."""
        if type(tenant_id) is str and tenant_id:
            self.foreign += 1
        else:
            _skip(self.skipped, STAMP_TENANT_ID)

    def undeclared_repo(self, row: Mapping[str, Any], slug: object) -> None:
        if type(slug) is str and slug:
            self.by_kind[KIND_UNDECLARED_REPO].append(row["id"])
        else:
            _skip(self.skipped, STAMP_REPO_SLUG)

    def off_yield(
        self,
        row: Mapping[str, Any],
        md: Mapping[str, Any],
        path: object,
        departed: bool,
        recorded_at: float,
    ) -> None:
        """A row on a path the envelope does not yield: it left the manifest (``departed``:
        actionable once the repo's generation is complete) or is not yielded; kept when the
        envelope predates it."""
        if not (type(path) is str and path):
            _skip(self.skipped, STAMP_SOURCE_PATH)
            return
        ingested = md["ingestedAt"]
        if not _is_finite_time(ingested):
            _skip(self.skipped, STAMP_INGESTED_AT)
        elif ingested > recorded_at:
            self.newer += 1
        elif departed:
            slug = md["repoSlug"]
            if slug not in self.whole_repo:
                self.whole_repo[slug] = generation_complete(
                    self.tenant.repos[slug], self.present_ids, self.fenced_ids
                )
            pending = not self.whole_repo[slug]
            kind = KIND_MANIFEST_ORPHAN_PENDING if pending else KIND_MANIFEST_ORPHAN
            self.by_kind[kind].append(row["id"])
        else:
            self.by_kind[KIND_UNYIELDED_PATH].append(row["id"])


def _sort_rows(rows: list[Any], s: _Sorting) -> None:
    """The hot loop: each row into its kind (``s.by_kind``) or a counter. A missing stamp raises
    KeyError, handled off the hot path; a type is checked only where it could change the outcome."""
    tenant_id, views, stale_limit, skipped = s.tenant.tenant_id, s.views, s.stale_limit, s.skipped
    restamp = s.by_kind[KIND_CONFIG_STALE]
    present, fenced = s.present_ids, s.fenced_ids
    # Where a yielded path's undeclared ids go: (stale-content, superseded), or the pending
    # pair while the path's replacement is incomplete. Bound once, reused by every path.
    by_kind = s.by_kind
    complete = (by_kind[KIND_STALE_CONTENT].append, by_kind[KIND_SUPERSEDED_GENERATION].append)
    pending = (by_kind[KIND_STALE_CONTENT_PENDING].append, by_kind[KIND_SUPERSEDED_PENDING].append)
    absent, unyielded = _ABSENT, _UNYIELDED
    for row in rows:
        try:
            md = row["metadata"]
            if md["tenantId"] != tenant_id:
                s.other_tenant(md["tenantId"])
                continue
            slug = md["repoSlug"]
            if slug not in views:
                s.undeclared_repo(row, slug)
                continue
            view = views[slug]
            if view is None:
                s.no_envelope += 1
                continue
            path = md["sourcePath"]
            table, parser_id, parser_version, recorded_at, targets_by_path, held = view
            # `in` + subscript rather than .get: two specialised dict ops beat a method call.
            declared = table[path] if path in table else absent
            if declared is absent or declared is unyielded:
                s.off_yield(row, md, path, declared is absent, recorded_at)
                continue
            rid = row["id"]
            if declared is not None and rid in declared:
                cfg = md["tenantConfigVersion"]
                if type(cfg) is not int:
                    _skip(skipped, STAMP_TENANT_CONFIG_VERSION)
                elif cfg <= stale_limit:
                    restamp.append(rid)
                continue
            pid = md["parserId"]
            pver = md["parserVersion"]
            if path in targets_by_path:
                targets = targets_by_path[path]
            else:  # per path, once: its replacement complete or not
                targets = targets_by_path[path] = (
                    complete
                    if held is None and replacement_complete(declared, present, fenced)
                    else pending
                )
            if pid == parser_id and pver == parser_version:
                targets[0](rid)
            elif not (type(pid) is str and pid):
                _skip(skipped, STAMP_PARSER_ID)
            elif not (type(pver) is str and pver):
                _skip(skipped, STAMP_PARSER_VERSION)
            else:
                targets[1](rid)
        except KeyError as exc:
            key = exc.args[0] if exc.args else None
            _skip(skipped, key if key in _ROW_STAMPS else STAMP_METADATA)
        except TypeError:
            _skip(skipped, _type_error_stamp(row))


def _drop_inconsistent(
    tenant: TenantDeclaration, by_kind: dict[str, list[Any]], duplicated: set[Any]
) -> int:
    """The last guards (docs/design/reconcile.md#orphans): an id read more than once, and an
    id the tenant declares anywhere, leave every kind they would act on; returns how many."""
    inconsistent = 0
    if duplicated:
        for kind, ids_ in by_kind.items():
            kept_ids = [i for i in ids_ if i not in duplicated]
            inconsistent += len(ids_) - len(kept_ids)
            by_kind[kind] = kept_ids
    conflicts = _declared_among(
        tenant, [ids_ for kind, ids_ in by_kind.items() if kind != KIND_CONFIG_STALE]
    )
    if conflicts:
        for kind, ids_ in by_kind.items():
            if kind != KIND_CONFIG_STALE and not conflicts.isdisjoint(ids_):
                kept_ids = [i for i in ids_ if i not in conflicts]
                inconsistent += len(ids_) - len(kept_ids)
                by_kind[kind] = kept_ids
    return inconsistent


def _plan(s: _Sorting, total: int, duplicates: int, inconsistent: int) -> ReconcilePlan:
    """Each kind's ids sorted (an id of the wrong form dropped and counted as skipped),
    what to delete, re-stamp and report as pending, and every row counted once."""
    by_kind, skipped = s.by_kind, s.skipped
    ids_by_kind: dict[str, tuple[str, ...]] = {}
    for kind in ORPHAN_KINDS:
        by_kind[kind], bad_ids = _sorted_ids(by_kind[kind])
        if bad_ids:
            skipped[STAMP_ID] = skipped.get(STAMP_ID, 0) + bad_ids
        ids_by_kind[kind] = tuple(by_kind[kind])
    # Concatenated sorted runs: timsort merges them instead of sorting from scratch.
    delete_ids = tuple(
        sorted(chain.from_iterable(by_kind[k] for k in ORPHAN_KINDS if k in ACTIONABLE_KINDS))
    )
    pending_ids = tuple(
        sorted(chain.from_iterable(by_kind[k] for k in ORPHAN_KINDS if k in PENDING_KINDS))
    )
    skipped_total = sum(skipped.values())
    classified = sum(len(ids_) for ids_ in ids_by_kind.values())
    # kept = this tenant's rows in no kind (the reasons beside it break part of it out),
    # derived rather than counted so the hot loop's commonest branch does no arithmetic.
    kept = total - duplicates - skipped_total - s.foreign - classified
    return ReconcilePlan(
        tenant_id=s.tenant.tenant_id,
        ids_by_kind=ids_by_kind,
        delete_ids=delete_ids,
        restamp_ids=ids_by_kind[KIND_CONFIG_STALE],
        pending_ids=pending_ids,
        skipped_unstamped=skipped_total,
        skipped_by_stamp=skipped,
        foreign=s.foreign,
        kept=kept,
        newer_than_envelope=s.newer,
        no_envelope=s.no_envelope,
        inconsistent=inconsistent,
        duplicate_rows=duplicates,
    )


def classify_orphans(
    tenant: TenantDeclaration,
    rows: Iterable[Mapping[str, Any]],
    present_ids: Set[str],
    fenced_ids: Set[str],
    stale_gap: int = DEFAULT_STALE_GAP,
) -> ReconcilePlan:
    """Classify the tenant's rows against its declaration (the kinds and their precedence:
    docs/design/reconcile.md#orphans). ``present_ids``: ids in the collection for this tenant;
    ``fenced_ids``: ids durably fenced at the current embedding generation."""
    if type(stale_gap) is not int or stale_gap < 1:
        raise ValueError("stale_gap must be an int >= 1")
    if not isinstance(present_ids, set | frozenset):
        present_ids = frozenset(present_ids)  # so subset tests run in C
    rows = rows if type(rows) is list else list(rows)
    unique, skipped, duplicated, duplicates = _unique_rows(rows)
    stale_limit = tenant.config_version - stale_gap
    sorting = _Sorting(tenant, present_ids, fenced_ids, stale_limit, skipped)
    _sort_rows(unique, sorting)
    inconsistent = _drop_inconsistent(tenant, sorting.by_kind, duplicated)
    return _plan(sorting, len(rows), duplicates, inconsistent)
