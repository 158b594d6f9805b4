"""A repo's parser-version switch behind the quality gate: the new parser's chunks are built
beside the old, whose chunks keep serving (``RepoDeclaration.held_parser``) until ``settle``
finds the switch allowed. A repo with no serving parser recorded records its declared one."""

import time
from collections.abc import Iterable, Mapping

import sqlalchemy as sa

from neo_assets.config.settings import Settings
from neo_assets.generations.serving import serving_generation
from neo_assets.quality.gate import (
    GateVerdict,
    ParserIdentity,
    held_switches,
    parser_decision,
    parser_gate,
)
from neo_assets.quality.records import decision, latest_scores
from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_rows import write_row
from neo_assets.store.ledger_schema import parser_serving
from neo_assets.tenants.validation import Tenant


def serving_parsers(ledger: Ledger, tenant_id: str) -> dict[str, ParserIdentity]:
    """Per repo of ``tenant_id``: the parser whose chunks serve it (as recorded)."""
    p = parser_serving.c
    with ledger.engine.connect() as conn:
        rows = conn.execute(
            sa.select(p.repo_slug, p.parser_id, p.parser_version).where(p.tenant_id == tenant_id)
        ).all()
    return {r.repo_slug: (r.parser_id, r.parser_version) for r in rows}


def record_serving_parser(
    ledger: Ledger, tenant_id: str, repo_slug: str, identity: ParserIdentity, now: float
) -> None:
    write_row(
        ledger.engine,
        parser_serving,
        tenant_id=tenant_id,
        repo_slug=repo_slug,
        parser_id=identity[0],
        parser_version=identity[1],
        updated_at=now,
    )


def switch_verdicts(
    settings: Settings,
    ledger: Ledger,
    tenant_id: str,
    declared: Mapping[str, ParserIdentity],
    generation: str | None,
) -> dict[str, GateVerdict]:
    """The gate's verdict on each held parser switch of the tenant's ``declared`` repos,
    from the self-evaluations made at ``generation`` (the serving one)."""
    held = held_switches(serving_parsers(ledger, tenant_id), declared)
    if not held:
        return {}
    scores = latest_scores(ledger, tenant_id, held) if settings.quality.gate else {}
    return {
        slug: parser_gate(
            tenant_id,
            slug,
            candidate,
            serving,
            generation or "",
            scores,
            settings.quality.margin,
            enabled=settings.quality.gate,
            overridden=decision(ledger, tenant_id, parser_decision(candidate)) is not None,
        )
        for slug, (candidate, serving) in held.items()
    }


def settle(
    settings: Settings,
    ledger: Ledger,
    tenant_id: str,
    declared: Mapping[str, ParserIdentity],
    generation: str | None,
    only: Iterable[str] | None = None,
) -> dict[str, GateVerdict]:
    """Record the declared parser as serving where nothing is recorded yet or the gate
    allows the switch; the verdicts of the switches still held. ``only`` limits it to
    those repos (a sweep settles its own)."""
    wanted = set(declared) if only is None else set(only) & set(declared)
    mine = {slug: declared[slug] for slug in wanted}
    recorded = serving_parsers(ledger, tenant_id)
    now = time.time()
    for slug in sorted(set(mine) - set(recorded)):
        record_serving_parser(ledger, tenant_id, slug, mine[slug], now)
    held: dict[str, GateVerdict] = {}
    for slug, verdict in switch_verdicts(settings, ledger, tenant_id, mine, generation).items():
        if verdict.allowed:
            record_serving_parser(ledger, tenant_id, slug, mine[slug], now)
        else:
            held[slug] = verdict
    return held


def settle_repo(
    settings: Settings, ledger: Ledger, tenant: Tenant, repo_slug: str | None = None
) -> None:
    """What a sweep's census settles for its own repo (every repo of the tenant when none
    is named): the first parser it is swept with is recorded; a switch the gate allows (or
    the gate off) takes over."""
    declared = {r.slug: (r.parser.id, r.parser.version) for r in tenant.repos}
    generation = serving_generation(settings, ledger, tenant.id, list(declared)).generation
    only = None if repo_slug is None else [repo_slug]
    settle(settings, ledger, tenant.id, declared, generation, only=only)
