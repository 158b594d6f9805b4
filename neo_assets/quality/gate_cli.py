"""`neo-assets quality allow`: an operator lets a generation serve a tenant past the
quality gate, with a reason kept in the ledger (`status` shows the gate's verdict)."""

import getpass
import time
from typing import Annotated

import typer

from neo_assets.cli import common


def register(app: typer.Typer) -> None:
    quality_app = typer.Typer(
        help="Answer quality: the gate on embedding-generation switches.", no_args_is_help=True
    )
    app.add_typer(quality_app, name="quality")

    @quality_app.command("evaluate")
    def evaluate(
        tenant: Annotated[str, typer.Option(help="the tenant whose due evaluations run")],
        as_json: Annotated[
            bool, typer.Option("--json", help="one JSON document on stdout")
        ] = False,
    ) -> None:
        """Run and record the tenant's due self-evaluations now (what the sweep step does
        after a sweep): the serving generation's at each repo's indexed revision, and a
        new generation's the quality gate waits on."""

        def go() -> int:
            import anyio

            from neo_assets.quality.measure import evaluate_due
            from neo_assets.query.search import QueryService
            from neo_assets.query.serving import Resident
            from neo_assets.services.handles import open_ledger, open_store

            settings, tenants = common.load_config()
            if tenants.tenant(tenant) is None:
                raise common.UsageError(
                    f"no tenant {tenant!r} in {tenants.path}; name a declared tenant"
                )
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

        common.run(go, as_json)

    @quality_app.command("allow")
    def allow(
        tenant: Annotated[str, typer.Argument(help="the tenant whose switch is held")],
        generation: Annotated[
            str, typer.Argument(help="the embedding generation to let serve (`status` names it)")
        ],
        reason: Annotated[str, typer.Option(help="why: kept in the ledger with your name")],
        as_json: Annotated[
            bool, typer.Option("--json", help="one JSON document on stdout")
        ] = False,
    ) -> None:
        """Let GENERATION serve TENANT although its self-evaluation is worse (or not yet
        measured); the decision is recorded with who made it and why."""

        def go() -> int:
            from neo_assets.generations.records import generation_records
            from neo_assets.quality.records import record_decision
            from neo_assets.services.handles import open_ledger

            settings, tenants = common.load_config()
            if tenants.tenant(tenant) is None:
                raise common.UsageError(
                    f"no tenant {tenant!r} in {tenants.path}; name a declared tenant"
                )
            if not reason.strip():
                raise common.UsageError("--reason: say why the switch is allowed")
            with open_ledger(settings) as ledger:
                known = generation_records(ledger)
                if generation not in known:
                    raise common.UsageError(
                        f"no embedding generation {generation!r} in the ledger (known: "
                        f"{', '.join(sorted(known)) or 'none'}); `neo-assets status` names "
                        "the one held by the gate"
                    )
                who = getpass.getuser()
                record_decision(ledger, tenant, generation, reason.strip(), who, time.time())
            doc = {"tenantId": tenant, "generation": generation, "reason": reason, "by": who}
            common.emit(doc, as_json)
            if not as_json:
                common.err.print(
                    f"{generation} may serve {tenant} past the quality gate ({who}: {reason})",
                    highlight=False,
                )
            return common.EXIT_OK

        common.run(go, as_json)
