"""The classifier's declaration, built from what the ledger recorded for each repo, and
whether those records may speak for the repo (its authority). Pure.
Design: docs/design/reconcile.md#authority"""

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from neo_assets.core import codes
from neo_assets.reconcile.rules.declaration import RepoDeclaration, TenantDeclaration


@dataclass(frozen=True)
class RepoRecords:
    """One declared repo: its declaration now and what the ledger recorded (``None`` when never
    recorded). ``envelope_paths``: path -> whether the declared parser yields it."""

    repo_slug: str
    parser_id: str
    parser_version: str
    declaration_digest: str
    envelope_revision: str | None = None
    envelope_recorded_at: float | None = None
    envelope_paths: Mapping[str, bool] = field(default_factory=dict)
    generation_revision: str | None = None
    generation_declaration_digest: str | None = None
    declared_chunks: Iterable[tuple[str, str]] = ()
    held_parser: tuple[str, str] | None = None  # RepoDeclaration.held_parser


def authority_problem(records: RepoRecords) -> str | None:
    """None when the records may speak for the repo, else why not (a RECONCILE_* code).
    Checks only the headers; ``repo_declaration`` also checks the chunks' consistency."""
    if records.envelope_revision is None or records.envelope_recorded_at is None:
        return codes.RECONCILE_NO_ENVELOPE
    if records.generation_revision is None:
        return codes.RECONCILE_NO_GENERATION
    if records.generation_revision != records.envelope_revision:
        return codes.RECONCILE_GENERATION_REVISION_MISMATCH
    if records.generation_declaration_digest != records.declaration_digest:
        return codes.RECONCILE_DECLARATION_MOVED
    at = records.envelope_recorded_at
    if type(at) not in (int, float) or not math.isfinite(at):
        return codes.RECONCILE_RECORDS_INCONSISTENT
    return None


def _without_authority(records: RepoRecords) -> RepoDeclaration:
    """The repo as declared, with no envelope: what its records say is not taken."""
    return RepoDeclaration(
        repo_slug=records.repo_slug,
        parser_id=records.parser_id,
        parser_version=records.parser_version,
        envelope_paths=frozenset(),
        yielded_paths=frozenset(),
        envelope_recorded_at=0.0,
        declared_ids_by_path={},
        has_complete_envelope=False,
        held_parser=records.held_parser,
    )


def repo_declaration(records: RepoRecords) -> tuple[RepoDeclaration, str | None]:
    """The repo as the classifier sees it, and the authority problem (None = authority)."""
    problem = authority_problem(records)
    if problem is not None:
        return _without_authority(records), problem
    yielded = frozenset(path for path, is_yielded in records.envelope_paths.items() if is_yielded)
    by_path: dict[str, set[str]] = {path: set() for path in yielded}
    for chunk_id, source_path in records.declared_chunks:
        ids = by_path.get(source_path)
        if ids is None:  # a chunk of a path the envelope does not yield: torn records
            return _without_authority(records), codes.RECONCILE_RECORDS_INCONSISTENT
        ids.add(chunk_id)
    # The records have authority: the repo with its envelope and declared generation.
    declaration = replace(
        _without_authority(records),
        envelope_paths=frozenset(records.envelope_paths),
        yielded_paths=yielded,
        envelope_recorded_at=float(records.envelope_recorded_at or 0.0),
        declared_ids_by_path={path: frozenset(ids) for path, ids in by_path.items()},
        has_complete_envelope=True,
    )
    return declaration, None


def tenant_declaration(
    tenant_id: str, config_version: int | None, repos: Iterable[RepoRecords]
) -> tuple[TenantDeclaration, dict[str, str | None]]:
    """The tenant's declaration and, per repo slug, its authority problem (None = none). An
    unobserved config version counts as 0, so nothing is re-stamped on it."""
    declared: dict[str, RepoDeclaration] = {}
    problems: dict[str, str | None] = {}
    for records in repos:
        declared[records.repo_slug], problems[records.repo_slug] = repo_declaration(records)
    version = config_version if type(config_version) is int and config_version > 0 else 0
    return TenantDeclaration(tenant_id=tenant_id, config_version=version, repos=declared), problems


def sweep_settled(
    *,
    last_outcome: str | None,
    last_ingested_rev: str | None,
    state_generation: str | None,
    state_declaration_digest: str | None,
    envelope_revision: str | None,
    generation_declaration_digest: str | None,
    current_generation: str,
    complete_outcome: str,
) -> bool:
    """True when the repo's latest sweep is settled: completed at the envelope's revision, under
    the declaration its generation was parsed with, at the current embedding generation."""
    return (
        last_outcome == complete_outcome
        and envelope_revision is not None
        and last_ingested_rev == envelope_revision
        and generation_declaration_digest is not None
        and state_declaration_digest == generation_declaration_digest
        and state_generation == current_generation
    )
