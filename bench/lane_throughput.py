"""Embedding-lane throughput against the fault server, as a share of the server's capacity.

    python -m bench.lane_throughput [--latency-ms 50] [--slots 2] [--batch 64] [--dims 32]
                                    [--inflight N] [--batches 80] [--skip-chroma]

The fault server (a real subprocess) answers every request after a fixed latency and
computes at most ``slots`` requests at once, so its capacity is known:
``slots * batch / latency`` inputs per second. Measured in the same run:

- ``baseline``: a bare httpx client keeping ``--inflight`` requests of ``batch`` inputs
  open back to back (what the server + HTTP stack deliver with no lane at all);
- ``lane``: ``EmbeddingLane`` through the real OpenAI-compatible provider, each finished
  batch handed to the write path (a worker thread) and dropped there;
- ``withChroma``: the same with a real Chroma collection behind the write path, against
  the store's own write rate measured alone (on a small machine the store, not the
  provider, is then the ceiling: the figure shows that embedding overlaps writing).

Both the bare client and the lane keep ``--inflight`` requests open (default ``2 *
slots``: one request waits at the server behind each slot, so no slot idles during a
client round trip).

Printed ratios: lane / capacity (the target is >= 0.90), lane / bare client (the lane's
own overhead) and bare client / capacity (the server's and HTTP stack's). Human lines go
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

import httpx
import numpy as np

from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.lane import EmbeddingLane
from neo_assets.embedding.providers.openai_compatible import OpenAICompatibleProvider
from neo_assets.embedding.rules.lane import LaneItem, LaneSettings
from neo_assets.store.chroma_store import ChromaStore, make_client
from neo_assets_tests.fakes.fence_book import InMemoryFenceBook
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor


def make_items(count: int) -> list[LaneItem]:
    return [
        LaneItem(
            chunk_id=f"{i:064x}",
            text=f"def handler_{i}(request):\n    return respond(request, status={i % 500})\n",
        )
        for i in range(count)
    ]


async def baseline(
    base_url: str, items: list[LaneItem], inflight: int, batch: int, dims: int
) -> float:
    """Inputs per second a bare client gets with ``inflight`` requests always in flight."""
    queue: asyncio.Queue[list[LaneItem]] = asyncio.Queue()
    for start in range(0, len(items), batch):
        queue.put_nowait(items[start : start + batch])
    url = f"{base_url}/v1/embeddings"

    async def worker(client: httpx.AsyncClient) -> None:
        while not queue.empty():
            b = queue.get_nowait()
            response = await client.post(url, json={"model": "bench", "input": [i.text for i in b]})
            response.raise_for_status()
            vectors = np.asarray([d["embedding"] for d in response.json()["data"]])
            assert vectors.shape == (len(b), dims)

    async with httpx.AsyncClient(timeout=60) as client:
        await client.post(url, json={"model": "bench", "input": ["warm up"]})
        started = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(inflight)))
        elapsed = time.perf_counter() - started
    return len(items) / elapsed


def store_baseline(store: ChromaStore, items: list[LaneItem], batch: int, dims: int) -> float:
    """Rows per second the store takes alone, written batch by batch (no provider)."""
    rng = np.random.default_rng(7)
    started = time.perf_counter()
    for start in range(0, len(items), batch):
        part = items[start : start + batch]
        write_rows(store, part, rng.standard_normal((len(part), dims)).astype(np.float32))
    return len(items) / (time.perf_counter() - started)


def write_rows(store: ChromaStore, items: list[LaneItem], vectors: np.ndarray) -> None:
    store.add(
        [i.chunk_id for i in items],
        vectors,
        [i.text for i in items],
        [{"tenantId": "bench", "repoSlug": "bench"} for _ in items],
    )


async def lane(
    base_url: str,
    items: list[LaneItem],
    inflight: int,
    batch: int,
    dims: int,
    store: ChromaStore | None,
) -> tuple[float, dict[str, Any]]:
    """Inputs per second through ``EmbeddingLane``, and its summary. With no store the
    vectors still go through the lane's write path (a worker thread), then are dropped."""
    provider = OpenAICompatibleProvider(
        base_url=base_url, model="bench", dimensions=dims, request_timeout_ms=60_000
    )

    def write(batch_items: list[LaneItem], vectors: np.ndarray) -> None:
        if store is not None:
            write_rows(store, batch_items, vectors)

    settings = LaneSettings(batch_size=batch, max_inflight=inflight, call_ceiling_ms=60_000)
    try:
        await provider.embed(["warm up"], CancelScope(label="warm-up"), "warm-up")
        started = time.perf_counter()
        summary = await EmbeddingLane(
            provider=provider,
            settings=settings,
            generation="bench",
            fence_book=InMemoryFenceBook(),
            write_batch=write,
            cancel_scope=CancelScope(label="bench"),
            clock=time.time,
        ).run(items)
        elapsed = time.perf_counter() - started
    finally:
        await provider.aclose()
    if summary.counts.embedded != len(items) or summary.errors:
        raise RuntimeError(f"the lane did not embed everything: {summary.counts}")
    return len(items) / elapsed, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument(
        "--inflight", type=int, default=None, help="lane max_inflight (default: 2 * slots)"
    )
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--batches", type=int, default=80, help="batches per run")
    parser.add_argument("--dims", type=int, default=32, help="vector dimensions")
    parser.add_argument("--skip-chroma", action="store_true", help="no real-Chroma run")
    args = parser.parse_args(argv)

    latency_s = args.latency_ms / 1000.0
    inflight = args.inflight or 2 * args.slots
    capacity = args.slots * args.batch / latency_s
    count = args.batches * args.batch
    chroma: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="neo-bench-") as tmp:
        control = {"latency_s": latency_s, "slots": args.slots}
        with FaultServerSupervisor(
            Path(tmp) / "server", dimensions=args.dims, control=control
        ) as srv:
            base_rate = asyncio.run(
                baseline(srv.base_url, make_items(count), inflight, args.batch, args.dims)
            )
            lane_rate, summary = asyncio.run(
                lane(srv.base_url, make_items(count), inflight, args.batch, args.dims, None)
            )
            if not args.skip_chroma:
                client = make_client(persist_dir=Path(tmp) / "chroma")
                store_rate = store_baseline(
                    ChromaStore(client, "store-baseline"), make_items(count), args.batch, args.dims
                )
                store = ChromaStore(client, "bench")
                chroma_rate, _ = asyncio.run(
                    lane(srv.base_url, make_items(count), inflight, args.batch, args.dims, store)
                )
                ceiling = min(capacity, store_rate)
                chroma = {
                    "storeAloneRowsPerS": round(store_rate, 1),
                    "laneInputsPerS": round(chroma_rate, 1),
                    "rowsWritten": store.count(),
                    "laneShareOfCeiling": round(chroma_rate / ceiling, 3),
                }

    result = {
        "latencyMs": args.latency_ms,
        "slots": args.slots,
        "batchSize": args.batch,
        "maxInflight": inflight,
        "dims": args.dims,
        "inputs": count,
        "requests": summary.counts.requests,
        "capacityInputsPerS": round(capacity, 1),
        "baselineInputsPerS": round(base_rate, 1),
        "laneInputsPerS": round(lane_rate, 1),
        "laneShareOfCapacity": round(lane_rate / capacity, 3),
        "laneShareOfBaseline": round(lane_rate / base_rate, 3),
        "baselineShareOfCapacity": round(base_rate / capacity, 3),
        "target": 0.9,
        "withChroma": chroma,
    }
    print(
        f"capacity {capacity:.0f}/s  bare client {base_rate:.0f}/s  lane {lane_rate:.0f}/s  "
        f"lane/capacity {lane_rate / capacity:.1%}  lane/bare client {lane_rate / base_rate:.1%}",
        file=sys.stderr,
    )
    if chroma is not None:
        print(
            f"with Chroma: store alone {chroma['storeAloneRowsPerS']:.0f} rows/s, lane "
            f"{chroma['laneInputsPerS']:.0f}/s = {chroma['laneShareOfCeiling']:.1%} of "
            "min(capacity, store)",
            file=sys.stderr,
        )
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
