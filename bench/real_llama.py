"""The embedding lane against llama.cpp's own ``llama-server``, as a share of what the
server itself delivers.

    python -m bench.real_llama [--inputs 256] [--batch 32] [--slots 2] [--lines 3]

Needs ``.ci/build-llama``'s artifacts (``llama-server`` and ``minilm-f16.gguf`` in
``$NEO_LLAMA_CACHE``, default ``~/.cache/neo-assets/llama``). One server (``--parallel
SLOTS``, ``-c 512*SLOTS``, ``-ub 512``) on loopback serves both sides, measured in the
same run, each twice (the better run counts, the first warms the server):

- ``own``: the server's own throughput: a bare httpx client keeping ``slots`` requests of
  ``batch`` inputs open back to back, vectors discarded;
- ``lane``: ``EmbeddingLane`` through the real OpenAI-compatible provider (``max_inflight``
  from the server's free slots, the provider-wide slot locks, the token-count guard),
  each finished batch handed to the write path and dropped there.

The figure is ``lane / own`` (target >= 0.90). Human lines go to stderr; the last stdout
line is one JSON object.
"""

import argparse
import asyncio
import hashlib
import json
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.lane import EmbeddingLane
from neo_assets.embedding.providers.openai_compatible import OpenAICompatibleProvider
from neo_assets.embedding.rules.lane import LaneItem, LaneSettings
from neo_assets.embedding.slot_backend import slots_for
from neo_assets_tests.fakes.fence_book import InMemoryFenceBook
from neo_assets_tests.real_servers import LlamaServer, gguf_model, llama_server_binary, running


def texts(count: int, lines: int) -> list[str]:
    return [
        f"def handler_{i}(request, value):\n"
        + "".join(f"    value = value * {i + k} + request.get('k{k}', {k})\n" for k in range(lines))
        for i in range(count)
    ]


async def own(base_url: str, inputs: list[str], batch: int, slots: int) -> dict[str, Any]:
    batches = [inputs[i : i + batch] for i in range(0, len(inputs), batch)]
    queue: asyncio.Queue[list[str]] = asyncio.Queue()
    for item in batches:
        queue.put_nowait(item)
    async with httpx.AsyncClient(timeout=120) as client:

        async def worker() -> None:
            while not queue.empty():
                part = queue.get_nowait()
                response = await client.post(
                    f"{base_url}/v1/embeddings",
                    json={"model": "minilm", "input": part, "encoding_format": "float"},
                )
                response.raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(slots)))
        elapsed = time.perf_counter() - started
    return {"seconds": elapsed, "inputsPerSecond": len(inputs) / elapsed, "requests": len(batches)}


async def lane(
    base_url: str, inputs: list[str], batch: int, slots_dir: Path, tag: str
) -> dict[str, Any]:
    provider = OpenAICompatibleProvider(
        base_url=base_url, model="minilm", dimensions=384, request_timeout_ms=120_000
    )
    items = [
        LaneItem(hashlib.sha256(f"{tag}-{i}".encode()).hexdigest(), text)
        for i, text in enumerate(inputs)
    ]
    settings = LaneSettings(
        batch_size=batch, max_inflight=2, inflight_from_server=True, context_tokens=100_000
    )
    try:
        # first contact (server facts, token-count probe) is not the lane's throughput
        await provider.server_facts(CancelScope(label="facts"))
        started = time.perf_counter()
        summary = await EmbeddingLane(
            provider=provider,
            settings=settings,
            generation="bench-real-llama",
            fence_book=InMemoryFenceBook(),
            write_batch=lambda b, v: None,
            cancel_scope=CancelScope(label="bench"),
            clock=time.time,
            slots=slots_for(provider.name, base_url, provider.model, 2, slots_dir),
        ).run(items)
        elapsed = time.perf_counter() - started
    finally:
        await provider.aclose()
    counts = summary.counts
    if counts.embedded != len(inputs):
        raise RuntimeError(f"lane embedded {counts.embedded} of {len(inputs)}: {counts}")
    return {
        "seconds": elapsed,
        "inputsPerSecond": len(inputs) / elapsed,
        "requests": counts.requests,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--inputs", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--lines", type=int, default=3)
    args = parser.parse_args(argv)
    if llama_server_binary() is None or gguf_model() is None:
        print(json.dumps({"error": "llama-server or minilm-f16.gguf missing: run .ci/build-llama"}))
        return 2
    inputs = texts(args.inputs, args.lines)
    # A terminated bench still stops its server (the ``finally`` of ``running``).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory() as tmp:
        server = LlamaServer(Path(tmp), slots=args.slots, ctx=512 * args.slots)
        with running(server):
            own_runs, lane_runs = [], []
            for run in range(2):
                own_runs.append(asyncio.run(own(server.base_url, inputs, args.batch, args.slots)))
                lane_runs.append(
                    asyncio.run(
                        lane(server.base_url, inputs, args.batch, Path(tmp) / "slots", f"r{run}")
                    )
                )
                print(
                    f"run {run}: own {own_runs[-1]['inputsPerSecond']:.0f}/s, "
                    f"lane {lane_runs[-1]['inputsPerSecond']:.0f}/s",
                    file=sys.stderr,
                )
    best_own = max(own_runs, key=lambda r: r["inputsPerSecond"])
    best_lane = max(lane_runs, key=lambda r: r["inputsPerSecond"])
    result = {
        "bench": "real_llama",
        "inputs": args.inputs,
        "batch": args.batch,
        "slots": args.slots,
        "own": best_own,
        "lane": best_lane,
        "laneOverOwn": round(best_lane["inputsPerSecond"] / best_own["inputsPerSecond"], 3),
        "target": 0.9,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
