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
            from neo_assets.services.handles import open_ledger
            from neo_assets.store.ledger_generations import generation_records
            from neo_assets.store.quality import record_decision

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
