"""What the provider-wide request slots cost per request: file locks (one machine) against
advisory locks in a Postgres ledger (every machine sharing it), in the same run.

    python -m bench.provider_slots [--cycles 500]

Each cycle is what the lane does around one provider request: ``acquire`` (shared: the
gate, then one slot) and ``release``; every tenth is a solo dispatch (the gate and every
slot). A real Postgres is started on loopback (initdb/pg_ctl, as the tests do). The
figures are per-cycle times and the ledger/file ratio; an embedding request of a batch
takes ~0.3-1 s on llama-server here, so either is a small share of it. Human lines go
to stderr; the last stdout line is one JSON object.
"""

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.provider_slots import ProviderSlots, Slots, provider_key
from neo_assets.store.ledger import Ledger
from neo_assets.store.ledger_slots import LedgerSlots


async def cycles(slots: Slots, n: int) -> float:
    """Seconds per acquire/release cycle (one in ten solo)."""
    scope = CancelScope(label="bench-slots")
    started = time.perf_counter()
    for i in range(n):
        held = await slots.acquire(scope, solo=i % 10 == 0, max_wait_s=5)
        slots.release(held)
    return (time.perf_counter() - started) / n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=500)
    args = parser.parse_args()
    from neo_assets_tests.servers import PostgresServer, postgres_bin_dir  # noqa: PLC0415

    if postgres_bin_dir() is None:
        sys.exit("bench.provider_slots needs initdb/pg_ctl (the postgresql package)")
    key = provider_key("openai_compatible", "http://127.0.0.1:1", "m")
    figures: dict[str, Any] = {"bench": "provider_slots", "cycles": args.cycles}
    with PostgresServer() as pg, tempfile.TemporaryDirectory() as tmp:
        url = pg.create_database()
        Ledger.open(url).dispose()
        files = ProviderSlots(Path(tmp) / key, 2)
        ledger = LedgerSlots(sa.create_engine(url, pool_size=4), key, 2)
        asyncio.run(cycles(files, 50))  # warm both
        asyncio.run(cycles(ledger, 50))
        figures["file_ms"] = round(1000 * asyncio.run(cycles(files, args.cycles)), 3)
        figures["ledger_ms"] = round(1000 * asyncio.run(cycles(ledger, args.cycles)), 3)
    figures["ledger_over_file"] = round(figures["ledger_ms"] / max(figures["file_ms"], 1e-9), 1)
    print(
        f"per request: file locks {figures['file_ms']} ms, ledger locks {figures['ledger_ms']} ms",
        file=sys.stderr,
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
