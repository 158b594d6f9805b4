"""Read-side truth: which rows a query may return; for each yielded path exactly one set
(the declared generation's when complete, else the previous set, else nothing). Pure.
Design: docs/design/query.md#read-side-truth"""

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Any

from neo_assets.reconcile.rules.declaration import (
    RepoDeclaration,
    TenantDeclaration,
    generation_complete,
)

# The per-path outcome, counted for the service's status and the tests.
SERVED_DECLARED = "declared"
SERVED_PREVIOUS = "previous"
SERVED_NOTHING = "nothing"


@dataclass(frozen=True, slots=True)
class RowStamp:
    """What the rule reads of one row (its metadata, typed)."""

    id: str
    repo_slug: str
    source_path: str
    kind: str
    name: str
    parser_id: str
    parser_version: str
    revision: str
    ingested_at: float

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "RowStamp | None":
        """None for a row whose stamps cannot place it (it holds no path)."""
        md = row.get("metadata")
        rid = row.get("id")
        if not isinstance(md, Mapping) or type(rid) is not str:
            return None
        strings = [md.get(key) for key in ("repoSlug", "sourcePath", "parserId", "parserVersion")]
        if any(type(v) is not str or not v for v in strings):
            return None
        at = md.get("ingestedAt")
        return cls(
            id=rid,
            repo_slug=strings[0],
            source_path=strings[1],
            kind=str(md.get("kind") or ""),
            name=str(md.get("name") or ""),
            parser_id=strings[2],
            parser_version=strings[3],
            revision=str(md.get("revision") or ""),
            ingested_at=float(at) if type(at) in (int, float) else 0.0,
        )


def row_is_servable(
    metadata: Mapping[str, Any] | None, tenant_id: str, embedding_generation: str
) -> bool:
    """The row is the tenant's and of the serving embedding generation."""
    return (
        isinstance(metadata, Mapping)
        and metadata.get("tenantId") == tenant_id
        and metadata.get("embeddingGeneration") == embedding_generation
    )


def previous_set(rows: Iterable[RowStamp], own: Set[str]) -> frozenset[str]:
    """The newest superseded set among ``rows`` (one path's), leaving out ``own`` (the
    ids the declared generation wrote itself). docs/design/query.md#read-side-truth."""
    older = [r for r in rows if r.id not in own]
    if not older:
        return frozenset()
    by_parser: dict[tuple[str, str], list[RowStamp]] = {}
    for r in older:
        by_parser.setdefault((r.parser_id, r.parser_version), []).append(r)
    # The newest parser identity: the one whose newest row was written last.
    newest = max(by_parser.values(), key=lambda rs: (max(r.ingested_at for r in rs), len(rs)))
    by_chunk: dict[tuple[str, str], dict[str, list[RowStamp]]] = {}
    for r in newest:
        by_chunk.setdefault((r.kind, r.name), {}).setdefault(r.revision, []).append(r)
    chosen: set[str] = set()
    for revisions in by_chunk.values():
        latest = max(revisions.values(), key=lambda rs: max(r.ingested_at for r in rs))
        chosen.update(r.id for r in latest)
    return frozenset(chosen)


@dataclass(frozen=True)
class RepoServing:
    """One repo's served ids and, per served path, which set it serves."""

    ids: frozenset[str]
    paths: Mapping[str, str]


def repo_serving(
    repo: RepoDeclaration,
    rows: Iterable[RowStamp],
    present_ids: Set[str],
    fenced_ids: Set[str],
    *,
    generation_revision: str | None,
) -> RepoServing:
    """The served ids of one declared repo (``rows``: its rows of the serving embedding
    generation; ``present_ids``: the ids present at that generation)."""
    by_path: dict[str, list[RowStamp]] = {}
    for r in rows:
        if r.repo_slug == repo.repo_slug:
            by_path.setdefault(r.source_path, []).append(r)
    served: set[str] = set()
    outcome: dict[str, str] = {}
    if not repo.has_complete_envelope:
        for path, path_rows in by_path.items():
            chosen = previous_set(path_rows, frozenset())
            served |= chosen
            outcome[path] = SERVED_PREVIOUS if chosen else SERVED_NOTHING
        return RepoServing(frozenset(served), outcome)
    identity = (repo.parser_id, repo.parser_version)
    for path in repo.yielded_paths:
        declared = repo.declared_ids_by_path.get(path)
        path_rows = by_path.get(path, [])
        if declared is not None and all(i in present_ids or i in fenced_ids for i in declared):
            served |= {r.id for r in path_rows if r.id in declared}
            outcome[path] = SERVED_DECLARED
            continue
        own = {
            r.id
            for r in path_rows
            if declared is not None
            and r.id in declared
            and r.revision == generation_revision
            and (r.parser_id, r.parser_version) == identity
        }
        chosen = previous_set(path_rows, own)
        served |= chosen
        outcome[path] = SERVED_PREVIOUS if chosen else SERVED_NOTHING
    if not generation_complete(repo, present_ids, fenced_ids):
        yielded = set(repo.yielded_paths)
        for path, path_rows in by_path.items():
            if path in yielded:
                continue
            chosen = previous_set(path_rows, frozenset())
            served |= chosen
            outcome[path] = SERVED_PREVIOUS if chosen else SERVED_NOTHING
    if repo.held_parser is not None:
        yielded_rows = {p: rs for p, rs in by_path.items() if p in repo.yielded_paths}
        return _held_serving(repo.held_parser, yielded_rows, served, outcome)
    return RepoServing(frozenset(served), outcome)


def _held_serving(
    held: tuple[str, str],
    by_path: Mapping[str, list[RowStamp]],
    served: set[str],
    outcome: dict[str, str],
) -> RepoServing:
    """While the quality gate holds the repo's parser switch, every yielded path that has
    rows of the held (serving) parser serves their newest set; a path only the declared
    parser has (a new file) keeps what the rule chose, so nothing becomes a hole. Paths
    no longer yielded (excluded, gone) follow the rule as without a hold."""
    for path, path_rows in by_path.items():
        old = [r for r in path_rows if (r.parser_id, r.parser_version) == held]
        if not old:
            continue
        served -= {r.id for r in path_rows}
        served |= previous_set(old, frozenset())
        outcome[path] = SERVED_PREVIOUS
    return RepoServing(frozenset(served), outcome)


def tenant_serving(
    declaration: TenantDeclaration,
    rows: Iterable[Mapping[str, Any]],
    fenced_ids: Set[str],
    *,
    embedding_generation: str,
    generation_revisions: Mapping[str, str | None],
) -> dict[str, RepoServing]:
    """Per declared repo of the tenant, what it serves. ``rows``: the tenant's rows (id +
    metadata); rows of another tenant, another embedding generation, or an undeclared
    repo are never served."""
    stamps: list[RowStamp] = []
    for row in rows:
        if not row_is_servable(row.get("metadata"), declaration.tenant_id, embedding_generation):
            continue
        stamp = RowStamp.from_row(row)
        if stamp is not None and stamp.repo_slug in declaration.repos:
            stamps.append(stamp)
    present = frozenset(s.id for s in stamps)
    by_repo: dict[str, list[RowStamp]] = {}
    for s in stamps:
        by_repo.setdefault(s.repo_slug, []).append(s)
    return {
        slug: repo_serving(
            repo,
            by_repo.get(slug, []),
            present,
            fenced_ids,
            generation_revision=generation_revisions.get(slug),
        )
        for slug, repo in declaration.repos.items()
    }
