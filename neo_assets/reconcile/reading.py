"""Read what reconciliation judges: a tenant's declaration (tenants.yaml + the ledger's
records), its rows (tenantId-filtered in Chroma, re-checked row by row), the ids present,
and the ids durably fenced at the current embedding generation."""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from neo_assets.config.settings import Settings
from neo_assets.core import codes
from neo_assets.embedding.rules.lane import FenceRecord
from neo_assets.embedding.rules.lane_rows import fence_row_from_record
from neo_assets.generations.serving import configured_generation
from neo_assets.quality.parser_switch import serving_parsers
from neo_assets.reconcile.rules.declaration import TenantDeclaration
from neo_assets.reconcile.rules.inputs import RepoRecords, sweep_settled, tenant_declaration
from neo_assets.store import ledger_schema as t
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger
from neo_assets.sweep.rules.fence_gate import is_durable_fence
from neo_assets.tenants.validation import RepoDecl, Tenant, TenantsFile


def find_tenant(tenants: TenantsFile, tenant_id: str) -> Tenant | None:
    return next((tenant for tenant in tenants.tenants if tenant.id == tenant_id), None)


def repo_records(
    ledger: Ledger, tenant_id: str, repo: RepoDecl, serving_parser: tuple[str, str] | None = None
) -> RepoRecords:
    """The repo's declaration now and its ledger records (chunks read only when the
    headers agree, since only then are they used). ``serving_parser``: the parser whose
    chunks serve the repo, when recorded (a different one than declared is held)."""
    # Never recorded: read as empty, so each record below is None.
    envelope = ledger.envelope(tenant_id, repo.slug) or {}
    generation = ledger.declared_generation(tenant_id, repo.slug) or {}
    digest = repo.declaration_digest()
    declared = (repo.parser.id, repo.parser.version)
    chunks: list[tuple[str, str]] = []
    if (
        envelope
        and generation
        and generation.get("revision") == envelope.get("revision")
        and generation.get("declaration_digest") == digest
    ):
        chunks = [(c.chunk_id, c.source_path) for c in ledger.declared_chunks(tenant_id, repo.slug)]
    return RepoRecords(
        repo_slug=repo.slug,
        parser_id=repo.parser.id,
        parser_version=repo.parser.version,
        declaration_digest=digest,
        envelope_revision=envelope.get("revision"),
        envelope_recorded_at=envelope.get("recorded_at"),
        envelope_paths={p["path"]: bool(p["yielded"]) for p in envelope.get("paths", ())},
        generation_revision=generation.get("revision"),
        generation_declaration_digest=generation.get("declaration_digest"),
        declared_chunks=chunks,
        held_parser=None if serving_parser == declared else serving_parser,
    )


def withheld_slugs(
    tenants: TenantsFile, tenant_id: str, rows: Iterable[dict[str, Any]]
) -> set[str]:
    """The tenant's repos that are declared but unusable (misdeclared with no last good
    declaration, declaration/rules.py): every repo its rows name when the whole tenant is
    withheld, or when part of the file names no tenant and this one is not declared)."""
    slugs = {slug for tid, slug in tenants.withheld if tid == tenant_id and slug is not None}
    unnamed = tenants.retires_nothing and find_tenant(tenants, tenant_id) is None
    if unnamed or (tenant_id, None) in tenants.withheld:
        for row in rows:
            slug = (row.get("metadata") or {}).get("repoSlug")
            if isinstance(slug, str) and slug:
                slugs.add(slug)
    return slugs


def read_declaration(
    ledger: Ledger,
    tenant_id: str,
    tenant: Tenant | None,
    withheld: Iterable[str] = (),
    *,
    release: bool = False,
) -> tuple[TenantDeclaration, dict[str, str | None], dict[str, RepoRecords]]:
    """The tenant's declaration, the authority problem per repo, and the records read. A
    ``withheld`` repo is declared without records (its rows are kept). ``release``: as if
    every parser switch the quality gate holds were allowed (the candidate side's view)."""
    serving = {} if release else serving_parsers(ledger, tenant_id)
    records = {
        repo.slug: repo_records(ledger, tenant_id, repo, serving.get(repo.slug))
        for repo in (tenant.repos if tenant is not None else ())
    }
    for slug in withheld:
        records.setdefault(
            slug,
            RepoRecords(repo_slug=slug, parser_id="", parser_version="", declaration_digest=""),
        )
    declaration, problems = tenant_declaration(
        tenant_id, ledger.current_config_version(tenant_id), records.values()
    )
    return declaration, problems, records


def declaration_marker(ledger: Ledger, tenant_id: str) -> tuple[Any, ...]:
    """A cheap fingerprint of the records a declaration is built from (config version,
    envelope and generation headers, the parsers serving): equal markers mean the
    declaration read is current."""
    with ledger.engine.connect() as conn:
        envelopes = conn.execute(
            sa.select(t.envelopes.c.repo_slug, t.envelopes.c.revision, t.envelopes.c.recorded_at)
            .where(t.envelopes.c.tenant_id == tenant_id)
            .order_by(t.envelopes.c.repo_slug)
        ).all()
        generations = conn.execute(
            sa.select(
                t.declared_generations.c.repo_slug,
                t.declared_generations.c.revision,
                t.declared_generations.c.declaration_digest,
                t.declared_generations.c.recorded_at,
            )
            .where(t.declared_generations.c.tenant_id == tenant_id)
            .order_by(t.declared_generations.c.repo_slug)
        ).all()
    return (
        ledger.current_config_version(tenant_id),
        tuple(tuple(r) for r in envelopes),
        tuple(tuple(r) for r in generations),
        tuple(sorted(serving_parsers(ledger, tenant_id).items())),
    )


def durable_fenced_ids(
    ledger: Ledger, tenant_id: str, repo_slugs: Iterable[str], generation: str
) -> frozenset[str]:
    """Ids durably fenced at ``generation``: a record the lane itself would honour as a
    fence (a known disposition) and the fence gate accepts as durable."""
    fenced: set[str] = set()
    for slug in repo_slugs:
        for record in ledger.fences(tenant_id, slug, generation):
            row = fence_row_from_record(FenceRecord.from_row(record), recorded_this_sweep=False)
            if row is not None and is_durable_fence(row):
                fenced.add(str(record["chunk_id"]))
    return frozenset(fenced)


@dataclass
class TenantSnapshot:
    """One consistent-enough reading of a tenant for classification and the checks."""

    tenant_id: str
    declaration: TenantDeclaration
    authority: dict[str, str | None]
    records: dict[str, RepoRecords]
    rows: list[dict[str, Any]]
    present: frozenset[str]
    fenced: frozenset[str]
    generation: str
    marker: tuple[Any, ...]

    def settled(self, ledger: Ledger, repo_slug: str) -> bool:
        """Whether the repo's sweep is settled at its recorded envelope (core rule)."""
        records = self.records.get(repo_slug)
        if records is None:
            return False
        state = ledger.repo_state(self.tenant_id, repo_slug) or {}
        return sweep_settled(
            last_outcome=state.get("last_outcome"),
            last_ingested_rev=state.get("last_ingested_rev"),
            state_generation=state.get("embedding_generation"),
            state_declaration_digest=state.get("declaration_digest"),
            envelope_revision=records.envelope_revision,
            generation_declaration_digest=records.generation_declaration_digest,
            current_generation=self.generation,
            complete_outcome=codes.OUTCOME_COMPLETE,
        )


def read_snapshot(
    settings: Settings, tenants: TenantsFile, tenant_id: str, store: ChromaStore, ledger: Ledger
) -> TenantSnapshot:
    """Rows first, records second. A sweep records its generation before it writes a
    row of it, so every row read here is declared by the records read after it; reading
    the other way round, a row written in between would look undeclared (stale)."""
    rows = list(store.tenant_rows(tenant_id))
    marker = declaration_marker(ledger, tenant_id)
    declaration, problems, records = read_declaration(
        ledger, tenant_id, find_tenant(tenants, tenant_id), withheld_slugs(tenants, tenant_id, rows)
    )
    generation = configured_generation(settings)
    fenced = durable_fenced_ids(ledger, tenant_id, declaration.repos, generation)
    return TenantSnapshot(
        tenant_id=tenant_id,
        declaration=declaration,
        authority=problems,
        records=records,
        rows=rows,
        present=frozenset(row["id"] for row in rows),
        fenced=fenced,
        generation=generation,
        marker=marker,
    )
