"""The provider health canary: run once (schedule or CLI), reuse a healthy result within its
TTL, back off after failures, record what a real probe saw. A diagnostic: it decides
nothing but its own record. Design: docs/design/health.md#canary"""

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from neo_assets.config.settings import Settings, load_settings
from neo_assets.embedding.cancel import CancelScope
from neo_assets.generations.serving import generation_for
from neo_assets.health import records as store
from neo_assets.health.probe import CANARY_DEADLINE_LEAF, probe_and_close
from neo_assets.health.rules.canary import (
    CANARY_OPERATION_LABEL,
    CanaryPolicy,
    CanaryRecord,
    ProviderIdentity,
    canary_record,
    reusable,
)
from neo_assets.services.handles import build_provider, open_ledger
from neo_assets.store.ledger import Ledger


@contextmanager
def ledger_for(settings: Settings, ledger: Ledger | None) -> Iterator[Ledger]:
    """``ledger`` when given; else one opened for this call and disposed after it."""
    if ledger is not None:
        yield ledger
        return
    with open_ledger(settings) as own:
        yield own


@dataclass(frozen=True)
class CanaryResult:
    record: CanaryRecord
    cached: bool  # True: served from the ledger (healthy within TTL, or a failure backing off)
    # The generation the probed provider embeds at (the one digest the sweep stamps).
    generation: str | None = None

    def to_doc(self) -> dict[str, Any]:
        return {**self.record.to_doc(cached=self.cached), "embeddingGeneration": self.generation}


async def canary_async(
    settings: Settings,
    ledger: Ledger,
    *,
    clock: Callable[[], float] = time.time,
    force: bool = False,
    upstream: CancelScope | None = None,
) -> CanaryResult:
    """Serve the latest record when it answers for now (``health.rules.canary.reusable``),
    else probe once and record the result (committed before it is returned)."""
    provider = build_provider(settings)
    # Provider, model, endpoint and the collection's dimension (never the API key).
    identity = ProviderIdentity(
        provider=provider.name,
        model=provider.model,
        endpoint=settings.embedding.base_url,
        dimension=settings.embedding.dimensions,
    )
    generation = generation_for(settings, provider.name, provider.model, provider.dimensions)
    policy = CanaryPolicy(
        ttl_s=settings.health.canary_ttl_s,
        backoff_initial_s=settings.health.canary_backoff_initial_s,
        backoff_max_s=settings.health.canary_backoff_max_s,
    )
    latest = store.latest_canary(ledger)
    if not force and reusable(latest, identity, clock(), policy):
        await provider.aclose()
        assert latest is not None  # reusable() is False for None
        return CanaryResult(record=latest, cached=True, generation=generation)
    outcome = await probe_and_close(
        provider,
        deadline_leaf=CANARY_DEADLINE_LEAF,
        operation_label=CANARY_OPERATION_LABEL,
        upstream=upstream,
    )
    record = canary_record(outcome, identity, clock(), latest, policy)
    store.record_canary(ledger, record)
    return CanaryResult(record=record, cached=False, generation=generation)


def run_canary(
    settings: Settings | None = None,
    ledger: Ledger | None = None,
    *,
    clock: Callable[[], float] = time.time,
    force: bool = False,
) -> CanaryResult:
    """``canary_async`` on a fresh event loop (the schedule's op and the CLI)."""
    settings = settings or load_settings()
    with ledger_for(settings, ledger) as held:
        return asyncio.run(canary_async(settings, held, clock=clock, force=force))
