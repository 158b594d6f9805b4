"""What a tenant declares now, as reconciliation and the read side's truth see it, and when
a path's (or a repo's) replacement is complete.
Design: docs/design/reconcile.md#authority"""

import math
from collections.abc import Mapping, Set
from dataclasses import dataclass


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
    # The parser whose chunks still serve while the quality gate holds a switch to the
    # declared one (``quality/parser_switch.py``): its rows are served and never reclaimed.
    held_parser: tuple[str, str] | None = None

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


def replacement_complete(
    declared: frozenset[str] | None, present_ids: frozenset[str] | set[str], fenced_ids: Set[str]
) -> bool:
    """Whether a yielded path's replacement is complete: its declared generation is
    recorded (``declared`` is not None) and every id in it is present or fenced."""
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
        replacement_complete(repo.declared_ids_by_path.get(path), present_ids, fenced_ids)
        for path in repo.yielded_paths
    )
