"""A test's own store and ledger: opened on first use from the settings of that moment
and closed by ``close`` (a fixture's teardown). Each Dagster run opens and closes its own,
so what a test reads through these is what the runs wrote.

    kb = KbHandles()
    kb.ledger.repo_state("acme", "widgets")
    kb.close()
"""

import uuid
from typing import TYPE_CHECKING, Any

from neo_assets.config.settings import load_settings
from neo_assets.services.handles import open_ledger, open_store
from neo_assets.store.ledger import Ledger

if TYPE_CHECKING:
    from neo_assets.store.chroma_store import ChromaStore
    from neo_assets.sweep.context import RepoContext


class KbHandles:
    def __init__(self) -> None:
        self._ledger: Ledger | None = None
        self._store: ChromaStore | None = None

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            self._ledger = open_ledger(load_settings())
        return self._ledger

    @property
    def store(self) -> "ChromaStore":
        if self._store is None:
            self._store = open_store(load_settings())
        return self._store

    def close(self) -> None:
        store, self._store = self._store, None
        ledger, self._ledger = self._ledger, None
        if store is not None:
            store.close()
        if ledger is not None:
            ledger.dispose()


def sweep_once(ctx: "RepoContext") -> dict[str, Any]:
    """One whole sweep of ``ctx`` through ``run_sweep`` (the entry point the CLI, the
    Dagster asset and the benches call), with handles opened from the settings of that
    moment and closed after; its contract-shaped result (``SweepResult.to_doc()``)."""
    from neo_assets.services.handles import build_provider  # noqa: PLC0415
    from neo_assets.sweep.run import SweepInputs, run_sweep  # noqa: PLC0415

    settings = load_settings()
    with open_ledger(settings) as ledger, open_store(settings) as store:
        result = run_sweep(
            SweepInputs(
                ctx=ctx,
                settings=settings,
                ledger=ledger,
                open_store=lambda: store,
                provider=build_provider(settings),
                run_id=str(uuid.uuid4()),
            )
        )
    return result.to_doc()
