"""`neo-assets canary` and `neo-assets unfreeze`: provider health at a terminal.

Registered by ``neo_assets/cli/app.py`` (``register(app)``); the shared helpers are
``neo_assets.cli.common``'s.
"""

import time
from typing import Annotated

import typer

from neo_assets.cli import common


def register(app: typer.Typer) -> None:
    """Add ``canary`` and ``unfreeze`` to ``app``."""

    @app.command()
    def canary(
        force: Annotated[
            bool, typer.Option("--force", help="probe now: ignore the cache and the back-off")
        ] = False,
        as_json: common.JsonOpt = False,
    ) -> None:
        """Run the provider health canary once and print its record (exit 0 healthy, 1 not)."""

        def go() -> int:
            from neo_assets.health.canary import run_canary

            settings = common.load_settings_or_usage()
            result = run_canary(settings, force=force)
            doc = result.to_doc()
            common.emit(doc, as_json)
            if not as_json:
                r = result.record
                common.err.print(
                    f"canary: {'healthy' if r.healthy else 'UNHEALTHY'}"
                    + (" (cached)" if result.cached else "")
                    + f"  code {r.code}  {r.elapsed_ms:.0f}/{r.timeout_ms} ms"
                    + f"  dimension {r.dimension} (expected {r.expected_dimension})"
                    + f"  {r.provider}:{r.model}"
                    + ("" if r.healthy else f"  next probe after {r.retry_at:.0f}"),
                    highlight=False,
                )
            return common.EXIT_OK if result.record.healthy else common.EXIT_FAILED

        common.run(go, as_json)

    @app.command()
    def unfreeze(
        as_json: common.JsonOpt = False,
    ) -> None:
        """Lift the collection's freeze record (an operator's decision after containment)."""

        def go() -> int:
            from neo_assets.health.canary import ledger_for
            from neo_assets.health.freezing import unfreeze as lift

            settings = common.load_settings_or_usage()
            with ledger_for(settings, None) as ledger:
                previous, lifted = lift(ledger, settings.store.collection_name, time.time())
            doc = {
                "lifted": lifted is not None,
                "previousState": previous.state if previous is not None else None,
                "freeze": (lifted or previous).to_doc() if (lifted or previous) else None,
            }
            common.emit(doc, as_json)
            if not as_json:
                if lifted is None:
                    common.err.print(
                        f"{settings.store.collection_name}: not frozen (state "
                        f"{previous.state if previous else 'never frozen'}); nothing to lift",
                        highlight=False,
                    )
                else:
                    common.err.print(
                        f"{settings.store.collection_name}: freeze lifted (was {previous.state}, "
                        f"trigger {previous.trigger}, {previous.attempts} re-probes)",
                        highlight=False,
                    )
            return common.EXIT_OK

        common.run(go, as_json)
