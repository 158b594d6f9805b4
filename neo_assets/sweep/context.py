"""The repo a sweep works on, its lane settings and the parser check every stage relies on."""

from dataclasses import dataclass, replace

from neo_assets.config.settings import Settings
from neo_assets.core import codes
from neo_assets.embedding.rules.lane import LaneSettings
from neo_assets.generations.serving import lane_geometry
from neo_assets.sources.revision import current_revision
from neo_assets.sources.rules.parser_versions import GENERATION_UNITS, parser_generation
from neo_assets.tenants.validation import RepoDecl, Tenant

# Rows per write of copied vectors (the store splits further at its own limit).
COPY_BATCH = 4096


@dataclass(frozen=True)
class RepoContext:
    """Who and what one sweep is about: taken from the declaration, never from content."""

    tenant: Tenant
    repo: RepoDecl

    @property
    def tenant_id(self) -> str:
        return self.tenant.id

    @property
    def repo_slug(self) -> str:
        return self.repo.slug

    @property
    def key(self) -> str:
        return f"{self.tenant.id}/{self.repo.slug}"

    def revision(self, settings: Settings) -> str | None:
        """The repo's revision now, as its envelope would list it (None: unreadable)."""
        repo = self.repo
        return current_revision(
            repo.path, repo.ref, repo.parser.effective_exclude, settings.sweep.max_file_bytes
        )


def lane_settings(settings: Settings) -> LaneSettings:
    """The lane's tunables on the generation's geometry (``generations.serving.lane_geometry``:
    the band in force and the call ceiling)."""
    embedding = settings.embedding
    return replace(
        lane_geometry(settings),
        batch_size=embedding.resolved_batch_size,
        max_inflight=embedding.max_inflight or 2,
        inflight_from_server=embedding.max_inflight is None,
        loading_max_wait_s=embedding.loading_max_wait_s,
        unreachable_wait_s=embedding.unreachable_wait_s,
        strike_threshold=embedding.strike_threshold,
        circuit_threshold=embedding.circuit_threshold,
        recovery_initial_s=embedding.recovery_initial_s,
        recovery_max_s=embedding.recovery_max_s,
        recovery_max_wait_s=embedding.recovery_max_wait_s,
    )


class ParserUnavailable(RuntimeError):
    """The repo's declared parser cannot run here (a grammar package is missing): the
    sweep fails at its start, before anything is written, naming what to install."""

    code = codes.PARSE_FAILED


def check_parser(ctx: RepoContext) -> None:
    """Before a sweep of a repo declared with parser 2.x: every tree-sitter grammar loads
    (else ParserUnavailable, code PARSE_FAILED, naming the repo and the pip package).
    Without it a missing grammar would window every file of its language silently
    (``grammar-unusable``) and declare that as the generation. 1.x needs no grammar."""
    if parser_generation(ctx.repo.parser.version) != GENERATION_UNITS:
        return
    from neo_assets.sources.parsers.grammars import GrammarUnavailable, check_grammars

    try:
        check_grammars()
    except GrammarUnavailable as exc:
        parser = f"{ctx.repo.parser.id} {ctx.repo.parser.version}"
        raise ParserUnavailable(f"{ctx.key}: parser {parser} cannot run: {exc}") from None
