"""Orphan classification for one tenant: which rows reconciliation may reclaim, and when.

Pure rules over plain data (no Chroma, no clock): the shell reads the tenant's rows with a
tenantId filter, hands them here with the declared configuration, and acts on the plan.

Every row lands in at most one kind. The precedence, and why:

1. **Containment first.** A row whose ``tenantId`` is not this tenant's is counted as
   ``foreign`` and nothing else is read from it, so no rule can ever act on it. A row with a
   missing or ill-typed ``tenantId`` cannot be placed at all and is skipped as unstamped.
2. **Repo.** ``repoSlug`` no longer declared by the tenant -> ``undeclared-repo``
   (actionable): no declaration stands behind the row, so no replacement will ever come
   and no yielded path can lose its set. A declared repo without a complete envelope gives
   no authority on path membership, so its rows are kept (counted as ``no_envelope``).
3. **Path membership** (the latest complete envelope is the authority, complete even while
   embedding runs in slices). Absent from the envelope -> ``manifest-orphan``; in the
   envelope but not yielded by the declared parser -> ``unyielded-path`` (actionable at
   once, regardless of parser identity: this is the tier that clears a ``vendor/**``
   exclusion without a parser bump). A path that left the manifest may have *moved* (a
   rename: its content's new rows sit on another path), so its rows are actionable only
   once the repo's declared generation is complete (every declared id of every yielded
   path present or fenced); until then they are ``manifest-orphan-pending`` and survive:
   content-keyed no hole, a renamed function is never absent while its new path waits.
   All three are scoped to what the envelope could see: a row
   ingested after the envelope was recorded (``ingestedAt > envelope_recorded_at``) was
   written by a sweep the envelope predates and is kept (``newer_than_envelope``).
4. **Yielded path, declared id.** The row *is* the declared generation: never deleted. When
   its ``tenantConfigVersion`` trails the tenant's by at least the gap it is ``config-stale``
   and goes to ``restamp_ids`` (unchanged chunks are never re-written by a sweep, so deleting
   them would open a hole).
5. **Yielded path, undeclared id.** A non-declared ``{parserId, parserVersion}`` ->
   ``superseded-generation``; the declared pair (same parser, old content) ->
   ``stale-content``. Both are actionable only when the path's replacement is complete
   (every declared id of the path present or fenced); until then they are reported as
   ``superseded-pending`` / ``stale-content-pending`` and survive. A config-stale row whose
   id is not declared lands here too: staleness of the config never outranks a kind that
   knows whether the row's replacement exists.

Replacement complete for a yielded path: the declared generation for the path is recorded
(the path is a key of ``declared_ids_by_path``) and every id in it is in ``present_ids`` or
``fenced_ids``. A recorded *empty* set (the path now yields zero chunks) is complete
vacuously: the declared generation has nothing to replace the old rows with, so reclaiming
them leaves the path with exactly the set its declared generation holds. A yielded path
with no recorded generation is never complete (unknown is not empty).

Last guards, for rows whose stamps contradict their identity (counted as ``inconsistent``
and kept): no id declared anywhere in the tenant is ever put in an actionable or pending
kind, even when a (hostile or corrupted) row's stamps place it on another path or repo, so
``delete_ids`` never holds a declared id; and an id read more than once (Chroma ids are
unique, so that is a read defect and which stamps to believe is unknowable) lands in no kind.

A row missing a stamp the rule it reaches needs (or carrying an ill-typed one: wrong type,
empty string, bool for int, non-finite time) is skipped and counted per stamp, never
classified; so is a row without an id, and a row that would land in a kind with an id that
is not a non-empty str. Stamps a rule does not read are not required (an
unyielded vendor row needs no parser stamps; a declared row needs no ingestedAt).

The plan: per kind its sorted ids; ``delete_ids`` = every actionable kind; ``restamp_ids`` =
``config-stale``; ``pending_ids`` = both pending kinds (reported, never acted on). Deletion
itself is the shell's, behind ``NEO_RECONCILIATION_ENABLED``, after ``plan_keeps_complete_sets``
and ``reverify_before_delete`` below.
"""

import math
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import Any, TypedDict

from neo_assets.core import codes

KIND_MANIFEST_ORPHAN = codes.KIND_MANIFEST_ORPHAN
KIND_MANIFEST_ORPHAN_PENDING = codes.KIND_MANIFEST_ORPHAN_PENDING
KIND_UNDECLARED_REPO = codes.KIND_UNDECLARED_REPO
KIND_UNYIELDED_PATH = codes.KIND_UNYIELDED_PATH
KIND_SUPERSEDED_GENERATION = codes.KIND_SUPERSEDED_GENERATION
KIND_SUPERSEDED_PENDING = codes.KIND_SUPERSEDED_PENDING
KIND_STALE_CONTENT = codes.KIND_STALE_CONTENT
KIND_STALE_CONTENT_PENDING = codes.KIND_STALE_CONTENT_PENDING
KIND_CONFIG_STALE = codes.KIND_CONFIG_STALE
ORPHAN_KINDS = (
    KIND_MANIFEST_ORPHAN,
    KIND_UNDECLARED_REPO,
    KIND_UNYIELDED_PATH,
    KIND_SUPERSEDED_GENERATION,
    KIND_SUPERSEDED_PENDING,
    KIND_STALE_CONTENT,
    KIND_STALE_CONTENT_PENDING,
    KIND_CONFIG_STALE,
    KIND_MANIFEST_ORPHAN_PENDING,
)
ACTIONABLE_KINDS = frozenset(
    {
        KIND_MANIFEST_ORPHAN,
        KIND_UNDECLARED_REPO,
        KIND_UNYIELDED_PATH,
        KIND_SUPERSEDED_GENERATION,
        KIND_STALE_CONTENT,
    }
)
PENDING_KINDS = frozenset(
    {KIND_SUPERSEDED_PENDING, KIND_STALE_CONTENT_PENDING, KIND_MANIFEST_ORPHAN_PENDING}
)

# Mirrors settings.reconcile.stale_gap's default; the shell passes the setting.
DEFAULT_STALE_GAP = 2
TELEMETRY_EXAMPLE_IDS = 5

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


class CollectionRow(TypedDict):
    """One row as the shell reads it from the collection."""

    id: str
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RepoDeclaration:
    """What one declared repo of a tenant says now: its parser pair and its latest complete
    envelope (path membership) with the declared generation (ids per yielded path)."""

    repo_slug: str
    parser_id: str
    parser_version: str
    envelope_paths: frozenset[str]
    yielded_paths: frozenset[str]
    envelope_recorded_at: float
    declared_ids_by_path: Mapping[str, frozenset[str]]
    has_complete_envelope: bool

    def __post_init__(self) -> None:
        # An inconsistent declaration is refused rather than guessed around: every rule
        # here trusts yielded <= envelope and declared paths <= yielded.
        object.__setattr__(self, "envelope_paths", frozenset(self.envelope_paths))
        object.__setattr__(self, "yielded_paths", frozenset(self.yielded_paths))
        object.__setattr__(
            self,
            "declared_ids_by_path",
            {path: frozenset(ids) for path, ids in self.declared_ids_by_path.items()},
        )
        if not self.yielded_paths <= self.envelope_paths:
            raise ValueError(f"{self.repo_slug}: yielded_paths must be a subset of envelope_paths")
        if not self.declared_ids_by_path.keys() <= self.yielded_paths:
            raise ValueError(f"{self.repo_slug}: declared_ids_by_path may only name yielded paths")
        if not math.isfinite(self.envelope_recorded_at):
            raise ValueError(f"{self.repo_slug}: envelope_recorded_at must be finite")


@dataclass(frozen=True, slots=True)
class TenantDeclaration:
    """A tenant's current declaration: its config version and its repos by slug."""

    tenant_id: str
    config_version: int
    repos: Mapping[str, RepoDeclaration]

    def __post_init__(self) -> None:
        for slug, repo in self.repos.items():
            if slug != repo.repo_slug:
                raise ValueError(f"repos key {slug!r} != repo_slug {repo.repo_slug!r}")


@dataclass(frozen=True, slots=True)
class ReconcilePlan:
    """The classification of one tenant's rows. Id lists are sorted tuples.

    Every input row is counted exactly once: in one kind, or in ``kept`` (this tenant's rows
    in no kind, of which ``newer_than_envelope``, ``no_envelope`` and ``inconsistent`` are
    broken out), ``skipped_unstamped``, ``foreign`` or ``duplicate_rows``."""

    tenant_id: str
    ids_by_kind: Mapping[str, tuple[str, ...]]
    delete_ids: tuple[str, ...]
    restamp_ids: tuple[str, ...]
    pending_ids: tuple[str, ...]
    skipped_unstamped: int
    skipped_by_stamp: Mapping[str, int]
    foreign: int
    kept: int
    newer_than_envelope: int
    no_envelope: int
    inconsistent: int
    duplicate_rows: int
    counts: Mapping[str, int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "counts", {kind: len(self.ids_by_kind.get(kind, ())) for kind in ORPHAN_KINDS}
        )

    def telemetry(self) -> dict[str, Any]:
        """Each kind under its own key with its count and a few example ids, so one kind can
        never be read as another; the skip and containment counters beside them."""
        return {
            "tenantId": self.tenant_id,
            "orphans": {
                kind: {
                    "count": self.counts[kind],
                    "ids": list(self.ids_by_kind.get(kind, ())[:TELEMETRY_EXAMPLE_IDS]),
                    "actionable": kind in ACTIONABLE_KINDS,
                }
                for kind in ORPHAN_KINDS
            },
            "actionable": len(self.delete_ids),
            "restamp": len(self.restamp_ids),
            "pending": len(self.pending_ids),
            "skippedUnstamped": self.skipped_unstamped,
            "skippedByStamp": dict(sorted(self.skipped_by_stamp.items())),
            "foreign": self.foreign,
            "kept": self.kept,
            "newerThanEnvelope": self.newer_than_envelope,
            "noEnvelope": self.no_envelope,
            "inconsistent": self.inconsistent,
            "duplicateRows": self.duplicate_rows,
        }


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


def _replacement_complete(
    declared: frozenset[str] | None, present_ids: frozenset[str] | set[str], fenced_ids: Set[str]
) -> bool:
    if declared is None:
        return False
    if declared.issubset(present_ids):  # the common answer, decided in C
        return True
    return bool(fenced_ids) and all(i in present_ids or i in fenced_ids for i in declared)


def generation_complete(repo: RepoDeclaration, present_ids: Set[str], fenced_ids: Set[str]) -> bool:
    """Whether the repo's declared generation is complete: it has authority and every
    declared id of every yielded path is present or fenced (the moves gate)."""
    if not repo.has_complete_envelope:
        return False
    return all(
        _replacement_complete(repo.declared_ids_by_path.get(path), present_ids, fenced_ids)
        for path in repo.yielded_paths
    )


def _declared_among(tenant: TenantDeclaration, candidates: list[list[Any]]) -> set[Any]:
    """The candidate ids that the tenant declares anywhere (the guard of the module doc).
    Costs one C-level disjointness test per declared path, against the candidates only."""
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


def classify_orphans(
    tenant: TenantDeclaration,
    rows: Iterable[Mapping[str, Any]],
    present_ids: Set[str],
    fenced_ids: Set[str],
    stale_gap: int = DEFAULT_STALE_GAP,
) -> ReconcilePlan:
    """Classify the tenant's rows against its declaration (see the module doc for the kinds
    and their precedence). ``present_ids``: ids in the collection for this tenant;
    ``fenced_ids``: ids durably fenced at the current embedding generation."""
    if type(stale_gap) is not int or stale_gap < 1:
        raise ValueError("stale_gap must be an int >= 1")
    tenant_id = tenant.tenant_id
    stale_limit = tenant.config_version - stale_gap  # stale when version <= this
    skipped: dict[str, int] = {}
    if not isinstance(present_ids, set | frozenset):
        present_ids = frozenset(present_ids)  # so subset tests run in C

    # Prepass in C: every row has an id and no id repeats -> the loop needs no per-row id
    # bookkeeping. An id's form (a non-empty str) is checked only for rows that land in a
    # kind, by the sort below: a row in no kind is not acted on, so its id's form is moot.
    rows = rows if type(rows) is list else list(rows)
    total = len(rows)
    duplicated: set[Any] = set()
    duplicates = 0
    try:
        clean = len(set(map(_GET_ID, rows))) == total
    except (KeyError, TypeError):
        clean = False
    if not clean:
        rows, bad_ids, duplicated, duplicates = _first_occurrences(rows)
        if bad_ids:
            skipped[STAMP_ID] = bad_ids

    # Per declared repo: (path table, parserId, parserVersion, recorded_at, per-path target
    # lists, filled lazily); None for a repo without a complete envelope.
    views: dict[str, tuple[Any, ...] | None] = {
        slug: (
            (
                _path_table(repo),
                repo.parser_id,
                repo.parser_version,
                repo.envelope_recorded_at,
                {},
            )
            if repo.has_complete_envelope
            else None
        )
        for slug, repo in tenant.repos.items()
    }

    manifest: list[str] = []
    manifest_pending: list[str] = []
    # Per repo slug, once: whether its declared generation is complete (the moves gate).
    whole_repo: dict[str, bool] = {}
    undeclared: list[str] = []
    unyielded: list[str] = []
    superseded: list[str] = []
    superseded_pending: list[str] = []
    stale: list[str] = []
    stale_pending: list[str] = []
    restamp: list[str] = []
    foreign = newer = no_envelope = 0
    stale_add, stale_pending_add = stale.append, stale_pending.append
    superseded_add, superseded_pending_add = superseded.append, superseded_pending.append
    absent = _ABSENT
    unyielded_marker = _UNYIELDED

    # The hot loop. Stamps are read by subscript with literal keys (a missing one raises
    # KeyError naming it, handled below, off the hot path); a type is checked only where a
    # wrong one could change the outcome: a slug, path or parser pair that matched a
    # declared one by equality is already a str, so those checks live on the other branches.
    for row in rows:
        try:
            md = row["metadata"]
            if md["tenantId"] != tenant_id:
                tid = md["tenantId"]
                if type(tid) is str and tid:
                    foreign += 1
                else:
                    skipped[STAMP_TENANT_ID] = skipped.get(STAMP_TENANT_ID, 0) + 1
                continue
            slug = md["repoSlug"]
            if slug not in views:
                if type(slug) is str and slug:
                    undeclared.append(row["id"])
                else:
                    skipped[STAMP_REPO_SLUG] = skipped.get(STAMP_REPO_SLUG, 0) + 1
                continue
            view = views[slug]
            if view is None:
                no_envelope += 1
                continue
            path = md["sourcePath"]
            table, parser_id, parser_version, recorded_at, targets_by_path = view
            # `in` + subscript rather than .get: two specialised dict ops beat a method call.
            declared = table[path] if path in table else absent
            if declared is absent or declared is unyielded_marker:
                if not (type(path) is str and path):
                    skipped[STAMP_SOURCE_PATH] = skipped.get(STAMP_SOURCE_PATH, 0) + 1
                    continue
                ingested = md["ingestedAt"]
                if not _is_finite_time(ingested):
                    skipped[STAMP_INGESTED_AT] = skipped.get(STAMP_INGESTED_AT, 0) + 1
                elif ingested > recorded_at:
                    newer += 1
                elif declared is absent:
                    if slug not in whole_repo:
                        whole_repo[slug] = generation_complete(
                            tenant.repos[slug], present_ids, fenced_ids
                        )
                    (manifest if whole_repo[slug] else manifest_pending).append(row["id"])
                else:
                    unyielded.append(row["id"])
                continue
            rid = row["id"]
            if declared is not None and rid in declared:
                cfg = md["tenantConfigVersion"]
                if type(cfg) is not int:
                    skipped[STAMP_TENANT_CONFIG_VERSION] = (
                        skipped.get(STAMP_TENANT_CONFIG_VERSION, 0) + 1
                    )
                elif cfg <= stale_limit:
                    restamp.append(rid)
                continue
            pid = md["parserId"]
            pver = md["parserVersion"]
            if path in targets_by_path:
                targets = targets_by_path[path]
            else:
                # Per path, once: (stale-content list, superseded list) by completeness.
                targets = targets_by_path[path] = (
                    (stale_add, superseded_add)
                    if _replacement_complete(declared, present_ids, fenced_ids)
                    else (stale_pending_add, superseded_pending_add)
                )
            if pid == parser_id and pver == parser_version:
                targets[0](rid)
            elif not (type(pid) is str and pid):
                skipped[STAMP_PARSER_ID] = skipped.get(STAMP_PARSER_ID, 0) + 1
            elif not (type(pver) is str and pver):
                skipped[STAMP_PARSER_VERSION] = skipped.get(STAMP_PARSER_VERSION, 0) + 1
            else:
                targets[1](rid)
        except KeyError as exc:
            key = exc.args[0] if exc.args else None
            stamp = key if key in _ROW_STAMPS else STAMP_METADATA
            skipped[stamp] = skipped.get(stamp, 0) + 1
        except TypeError:
            stamp = _type_error_stamp(row)
            skipped[stamp] = skipped.get(stamp, 0) + 1

    by_kind = {
        KIND_MANIFEST_ORPHAN: manifest,
        KIND_UNDECLARED_REPO: undeclared,
        KIND_UNYIELDED_PATH: unyielded,
        KIND_SUPERSEDED_GENERATION: superseded,
        KIND_SUPERSEDED_PENDING: superseded_pending,
        KIND_STALE_CONTENT: stale,
        KIND_STALE_CONTENT_PENDING: stale_pending,
        KIND_CONFIG_STALE: restamp,
        KIND_MANIFEST_ORPHAN_PENDING: manifest_pending,
    }
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
    kept = total - duplicates - skipped_total - foreign - classified
    return ReconcilePlan(
        tenant_id=tenant_id,
        ids_by_kind=ids_by_kind,
        delete_ids=delete_ids,
        restamp_ids=ids_by_kind[KIND_CONFIG_STALE],
        pending_ids=pending_ids,
        skipped_unstamped=skipped_total,
        skipped_by_stamp=skipped,
        foreign=foreign,
        kept=kept,
        newer_than_envelope=newer,
        no_envelope=no_envelope,
        inconsistent=inconsistent,
        duplicate_rows=duplicates,
    )


def plan_keeps_complete_sets(
    plan: ReconcilePlan,
    tenant: TenantDeclaration,
    rows: Iterable[Mapping[str, Any]],
    present_ids: Set[str],
    fenced_ids: Set[str],
) -> list[str]:
    """The no-hole check on a plan, independent of the classifier that made it.

    A path that left the manifest (a deleted, moved or renamed file) may lose its rows only
    when the repo's whole declared generation is complete after the plan, so moved content
    is served from its new path before the old rows go.

    A yielded path keeps a complete set under the plan when either the plan removes none of
    its rows (whatever set it holds now stays intact), or after the plan its declared
    generation is complete: the path's generation is recorded and every declared id is in
    ``present_ids - plan.delete_ids`` or in ``fenced_ids``. A path's rows are the tenant's
    rows stamped with its repoSlug and sourcePath, plus its declared ids by identity.

    Returns the offending paths as sorted ``"repoSlug:sourcePath"`` strings (empty = safe).
    A deleted row of a declared repo without a complete envelope is reported too (path
    membership unknown, so no hole can be ruled out), and a deleted row of this tenant whose
    repoSlug or sourcePath cannot be read is reported as ``"unlocatable:<id>"``.
    """
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
    """The re-read check run right before a delete batch: of the ids the plan would delete
    (``expected_kinds``: id -> the kind the plan gave it), return the sorted ids that may
    still be deleted: re-read now (``reread_metadata``: id -> metadata, None when gone),
    still carrying this tenant's id, and classified into the same actionable kind by the
    same classifier against the current declaration and current present/fenced ids."""
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


def residue_share(tenant: TenantDeclaration, rows: Iterable[Mapping[str, Any]]) -> float:
    """Share of the tenant's parser-stamped rows whose ``{parserId, parserVersion}`` is not
    their repo's declared pair (rows of an undeclared repo count as residue: no declaration
    stands behind them). Foreign rows and rows without both stamps (or a repoSlug) are in
    neither numerator nor denominator. 0.0 when no row qualifies."""
    tenant_id = tenant.tenant_id
    repos = tenant.repos
    stamped = residue = 0
    for row in rows:
        md = row.get("metadata") if isinstance(row, Mapping) else None
        if not isinstance(md, Mapping) or md.get(STAMP_TENANT_ID) != tenant_id:
            continue
        slug = md.get(STAMP_REPO_SLUG)
        pid = md.get(STAMP_PARSER_ID)
        pver = md.get(STAMP_PARSER_VERSION)
        if type(slug) is not str or type(pid) is not str or type(pver) is not str:
            continue
        stamped += 1
        repo = repos.get(slug)
        if repo is None or pid != repo.parser_id or pver != repo.parser_version:
            residue += 1
    return residue / stamped if stamped else 0.0
