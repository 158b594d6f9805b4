"""`neo-assets quality allow`: an operator lets a generation serve a tenant past the
quality gate, with a reason kept in the ledger (`status` shows the gate's verdict)."""

import getpass
import time
from typing import Annotated

import typer

from neo_assets.cli import common


def register(app: typer.Typer) -> None:
    quality_app = typer.Typer(
        help="Answer quality: the gate on embedding-generation and parser-version switches.",
        no_args_is_help=True,
    )
    app.add_typer(quality_app, name="quality")

    @quality_app.command("evaluate")
    def evaluate(
        tenant: Annotated[str, typer.Option(help="the tenant whose due evaluations run")],
        as_json: common.JsonOpt = False,
    ) -> None:
        """Run and record the tenant's due self-evaluations now (what the sweep step does
        after a sweep): the serving generation's at each repo's indexed revision, and a
        new generation's or parser version's the quality gate waits on."""
        common.run(lambda: _evaluate(tenant, as_json), as_json)

    @quality_app.command("allow")
    def allow(
        tenant: Annotated[str, typer.Argument(help="the tenant whose switch is held")],
        generation: Annotated[
            str,
            typer.Argument(
                help="the embedding generation, or parser:<id>@<version>, to let serve "
                "(`status` names it)"
            ),
        ],
        reason: Annotated[str, typer.Option(help="why: kept in the ledger with your name")],
        as_json: common.JsonOpt = False,
    ) -> None:
        """Let GENERATION (or a parser version) serve TENANT although its self-evaluation
        is worse (or not yet measured); the decision is recorded with who made it and why."""
        common.run(lambda: _allow(tenant, generation, reason, as_json), as_json)


def _known_tenant(tenants, tenant: str) -> None:
    if tenants.tenant(tenant) is None:
        raise common.UsageError(f"no tenant {tenant!r} in {tenants.path}; name a declared tenant")


def _evaluate(tenant: str, as_json: bool) -> int:
    import anyio

    from neo_assets.quality.measure import evaluate_due
    from neo_assets.query.search import QueryService
    from neo_assets.query.serving import Resident
    from neo_assets.services.handles import open_ledger, open_store

    settings, tenants = common.load_config()
    _known_tenant(tenants, tenant)
    with open_ledger(settings) as ledger, open_store(settings) as store:
        resident = Resident(settings, store, ledger)
        try:
            measured = anyio.run(evaluate_due, QueryService(resident), tenant)
        finally:
            anyio.run(resident.aclose)
    doc = {
        "tenantId": tenant,
        "evaluations": [
            {
                "repoSlug": m.due.repo_slug,
                "generation": m.due.generation,
                "reason": m.due.reason,
                "problem": m.problem,
                **(
                    {
                        "questions": m.score.questions,
                        "recallAt10": m.score.recall_at_10,
                        "mrrAt10": m.score.mrr_at_10,
                    }
                    if m.score
                    else {}
                ),
            }
            for m in measured
        ],
    }
    common.emit(doc, as_json)
    if not as_json:
        for e in doc["evaluations"]:
            common.err.print(
                f"{tenant}/{e['repoSlug']} at {e['generation']}: "
                + (
                    f"MRR@10 {e['mrrAt10']:.3f} recall@10 {e['recallAt10']:.3f} "
                    f"over {e['questions']} questions"
                    if "mrrAt10" in e
                    else f"not evaluated ({e['problem']})"
                ),
                highlight=False,
            )
        if not measured:
            common.err.print(f"{tenant}: no evaluation is due", highlight=False)
    return common.EXIT_OK


def _allow(tenant: str, generation: str, reason: str, as_json: bool) -> int:
    from neo_assets.generations.records import generation_records
    from neo_assets.generations.serving import serving_generation
    from neo_assets.quality.parser_switch import settle
    from neo_assets.quality.records import record_decision
    from neo_assets.services.handles import open_ledger

    settings, tenants = common.load_config()
    _known_tenant(tenants, tenant)
    if not reason.strip():
        raise common.UsageError("--reason: say why the switch is allowed")
    repos = tenants.tenant(tenant).repos
    declared = {r.slug: (r.parser.id, r.parser.version) for r in repos}
    with open_ledger(settings) as ledger:
        if generation.startswith("parser:"):
            named = {f"parser:{pid}@{version}" for pid, version in declared.values()}
            if generation not in named:
                raise common.UsageError(
                    f"{tenant} declares no parser {generation.removeprefix('parser:')!r} "
                    f"(declared: {', '.join(sorted(named))}); `neo-assets status` names the "
                    "one held by the gate"
                )
        else:
            known = generation_records(ledger)
            if generation not in known:
                raise common.UsageError(
                    f"no embedding generation {generation!r} in the ledger (known: "
                    f"{', '.join(sorted(known)) or 'none'}); `neo-assets status` names "
                    "the one held by the gate"
                )
        who = getpass.getuser()
        record_decision(ledger, tenant, generation, reason.strip(), who, time.time())
        serving = serving_generation(settings, ledger, tenant, list(declared)).generation
        settle(settings, ledger, tenant, declared, serving)  # a parser switch takes over now
    doc = {"tenantId": tenant, "generation": generation, "reason": reason, "by": who}
    common.emit(doc, as_json)
    if not as_json:
        common.err.print(
            f"{generation} may serve {tenant} past the quality gate ({who}: {reason})",
            highlight=False,
        )
    return common.EXIT_OK
