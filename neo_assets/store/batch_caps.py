"""The ledger's memory of provider batch caps (``ledger_schema.provider_batch_caps``) and
the lane's view of it for one provider (``LedgerBatchCaps``, the lane's
``BatchCapMemory``); the rule of which cap a lane starts at is ``embedding.rules.batch_caps``."""

from collections.abc import Callable
from dataclasses import dataclass, field

import sqlalchemy as sa

from neo_assets.embedding.rules.batch_caps import RememberedCap, provider_cap_key, starting_cap
from neo_assets.store import ledger_schema as t
from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_rows import first_row, write_row

EVIDENCE_MAX_CHARS = 2_000


def provider_batch_cap(
    ledger: Ledger, provider: str, base_url: str, model: str
) -> RememberedCap | None:
    table = t.provider_batch_caps
    key = provider_cap_key(provider, base_url, model)
    row = first_row(ledger.engine, sa.select(table).where(table.c.provider_key == key))
    if row is None:
        return None
    return RememberedCap(int(row["batch_cap"]), float(row["learned_at"]), row["evidence"] or "")


def record_batch_cap(
    ledger: Ledger,
    provider: str,
    base_url: str,
    model: str,
    *,
    cap: int,
    evidence: str,
    now: float,
) -> None:
    write_row(
        ledger.engine,
        t.provider_batch_caps,
        provider_key=provider_cap_key(provider, base_url, model),
        provider=provider,
        base_url=base_url.rstrip("/"),
        model=model,
        batch_cap=cap,
        learned_at=now,
        evidence=evidence[:EVIDENCE_MAX_CHARS],
    )


@dataclass(eq=False)
class LedgerBatchCaps:
    """One remote provider's remembered cap: read when a lane starts, written the moment
    the lane learns one."""

    ledger: Ledger
    provider: tuple[str, str, str]  # kind, base URL, model
    clock: Callable[[], float] = field(kw_only=True)

    def recall(self) -> int | None:
        return starting_cap(provider_batch_cap(self.ledger, *self.provider), self.clock())

    def remember(self, cap: int, evidence: str) -> None:
        record_batch_cap(self.ledger, *self.provider, cap=cap, evidence=evidence, now=self.clock())


def batch_cap_memory(
    ledger: Ledger, provider: object, *, clock: Callable[[], float]
) -> LedgerBatchCaps | None:
    """The memory of ``provider``'s cap; None for an in-process provider (no server)."""
    base_url = getattr(provider, "base_url", None)
    if not base_url:
        return None
    name, model = str(getattr(provider, "name", "")), str(getattr(provider, "model", ""))
    return LedgerBatchCaps(ledger, (name, str(base_url), model), clock=clock)
