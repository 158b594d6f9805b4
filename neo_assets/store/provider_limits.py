"""The ledger's record of what each provider said about itself at its last contact, written
by ``embedding/discovery.py`` and read by every generation digest
(``embedding/band.band_for``), so they agree without the network. A missing ledger or
table reads None: nothing discovered."""

from pathlib import Path

import sqlalchemy as sa

from neo_assets.embedding.rules.band import Discovery
from neo_assets.embedding.rules.batch_caps import provider_cap_key
from neo_assets.store import ledger_schema as t
from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_engine import ledger_engine
from neo_assets.store.ledger_rows import write_row

_READERS: dict[str, sa.Engine] = {}


def recorded_discovery_at(
    url: str, provider: str, base_url: str | None, model: str | None
) -> Discovery | None:
    """``recorded_discovery`` of the ledger at ``url``."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if not path or path == ":memory:" or not Path(path).exists():
            return None  # a private or not yet created ledger has nothing recorded
    engine = _READERS.get(url)
    if engine is None:
        engine = _READERS[url] = ledger_engine(url)
    try:
        return recorded_discovery(Ledger(engine), provider, base_url, model)
    except sa.exc.SQLAlchemyError:
        return None  # not migrated yet (no table): nothing discovered


def recorded_discovery(
    ledger: Ledger, provider: str, base_url: str | None, model: str | None
) -> Discovery | None:
    c = t.provider_limits.c
    key = provider_cap_key(provider, base_url or "", model or "")
    with ledger.engine.connect() as conn:
        row = conn.execute(sa.select(t.provider_limits).where(c.provider_key == key)).first()
    if row is None:
        return None
    return Discovery(
        row.limit_tokens,
        row.limit_source,
        row.tokenizer,
        learned_limit=row.learned_limit,
        chars_per_token=row.chars_per_token,
    )


def record_discovery(
    ledger: Ledger,
    provider: str,
    base_url: str | None,
    model: str | None,
    found: Discovery,
    now: float,
) -> None:
    write_row(
        ledger.engine,
        t.provider_limits,
        provider_key=provider_cap_key(provider, base_url or "", model or ""),
        provider=provider,
        base_url=(base_url or "").rstrip("/"),
        model=model or "",
        limit_tokens=found.limit_tokens,
        limit_source=found.source[:500],
        tokenizer=found.tokenizer,
        learned_limit=found.learned_limit,
        chars_per_token=found.chars_per_token,
        discovered_at=now,
    )
