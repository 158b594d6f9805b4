"""The hashing embedder's helper process: same vectors as in-process, never in the way.

A real helper process each time: started, used, killed, closed.
"""

import asyncio
import time

import numpy as np
import pytest

from neo_assets.concurrency.hashing_worker import HashingWorker
from neo_assets.concurrency.helper_process import HelperUnavailable
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.providers.hashing import HashingProvider, embed_texts

DIMS = 64
TEXTS = [f"def handler_{i}(value):\n    return value * {i}  # ünïcode {i}\n" for i in range(40)]


def _scope() -> CancelScope:
    return CancelScope(label="test")


def _wait_ready(worker: HashingWorker, texts: list[str], timeout_s: float = 30.0) -> np.ndarray:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return worker.embed(texts)
        except HelperUnavailable as exc:
            if str(exc) != "starting" or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def test_the_helper_computes_the_in_process_vectors_bit_for_bit() -> None:
    worker = HashingWorker(DIMS)
    try:
        got = _wait_ready(worker, TEXTS)
        again = worker.embed(["", "x", *TEXTS[:3]])
    finally:
        worker.close()
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), DIMS)
    assert np.array_equal(got, embed_texts(TEXTS, DIMS))
    assert np.array_equal(again, embed_texts(["", "x", *TEXTS[:3]], DIMS))


def test_a_closed_helper_has_exited_and_refuses_work() -> None:
    worker = HashingWorker(DIMS)
    _wait_ready(worker, TEXTS[:2])
    worker.close()
    assert worker.helper._proc.poll() is not None
    with pytest.raises(HelperUnavailable, match="closed"):
        worker.embed(TEXTS[:2])


def test_a_killed_helper_is_reported_broken_not_hung() -> None:
    worker = HashingWorker(DIMS)
    try:
        _wait_ready(worker, TEXTS[:2])
        worker.helper._proc.kill()
        worker.helper._proc.wait(timeout=10)
        with pytest.raises(HelperUnavailable, match="pipe failed"):
            worker.embed(TEXTS)
        assert worker.broken is not None
    finally:
        worker.close()


def test_small_calls_never_start_a_helper() -> None:
    async def run() -> HashingProvider:
        provider = HashingProvider(dimensions=DIMS)  # the default threshold
        vectors = await provider.embed(TEXTS, _scope(), "small")
        assert np.array_equal(vectors, embed_texts(TEXTS, DIMS))
        return provider

    provider = asyncio.run(run())
    assert provider._worker is None and provider.offloaded_texts == 0


def test_big_calls_go_to_the_helper_once_it_is_up_with_identical_vectors() -> None:
    async def run() -> tuple[list[np.ndarray], int, HashingWorker | None]:
        provider = HashingProvider(dimensions=DIMS, offload_min_texts=10)
        out = [await provider.embed(TEXTS, _scope(), "first")]  # starts it, hashes here
        worker = provider._worker
        assert worker is not None and provider.offloaded_texts == 0
        deadline = time.monotonic() + 30
        while provider.offloaded_texts == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            out.append(await provider.embed(TEXTS, _scope(), "later"))
        offloaded = provider.offloaded_texts
        await provider.aclose()
        return out, offloaded, worker

    out, offloaded, worker = asyncio.run(run())
    assert offloaded == len(TEXTS)  # the last call, and only it, went to the helper
    expected = embed_texts(TEXTS, DIMS)
    assert all(np.array_equal(v, expected) for v in out)
    assert worker is not None and worker.helper._proc.poll() is not None  # aclose ended it


def test_a_helper_that_dies_mid_sweep_falls_back_to_in_process_hashing() -> None:
    async def run() -> tuple[np.ndarray, HashingProvider]:
        provider = HashingProvider(dimensions=DIMS, offload_min_texts=10)
        await provider.embed(TEXTS, _scope(), "start")
        worker = provider._worker
        assert worker is not None
        deadline = time.monotonic() + 30
        while provider.offloaded_texts == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            await provider.embed(TEXTS, _scope(), "until-up")
        worker.helper._proc.kill()
        worker.helper._proc.wait(timeout=10)
        vectors = await provider.embed(TEXTS, _scope(), "after-death")
        await provider.aclose()
        return vectors, provider

    vectors, provider = asyncio.run(run())
    assert np.array_equal(vectors, embed_texts(TEXTS, DIMS))
    assert provider.offloaded_texts == len(TEXTS)  # the call after the death was not


def test_prepare_starts_the_helper_so_the_first_big_call_uses_it() -> None:
    async def run() -> tuple[int, HashingWorker | None, np.ndarray]:
        provider = HashingProvider(dimensions=DIMS, offload_min_texts=10)
        provider.prepare()
        provider.prepare()  # once is enough: the same helper
        worker = provider._worker
        assert worker is not None
        _wait_ready(worker, TEXTS[:1])  # up (what the files' parsing gives it time for)
        vectors = await provider.embed(TEXTS, _scope(), "first")
        offloaded = provider.offloaded_texts
        await provider.aclose()
        await provider.aclose()  # closing twice is harmless
        return offloaded, worker, vectors

    offloaded, worker, vectors = asyncio.run(run())
    assert offloaded == len(TEXTS)  # the very first call went to the helper
    assert np.array_equal(vectors, embed_texts(TEXTS, DIMS))
    assert worker is not None and worker.helper._proc.poll() is not None


def test_prepare_starts_nothing_when_offloading_is_off() -> None:
    provider = HashingProvider(dimensions=DIMS, offload_min_texts=None)
    provider.prepare()
    assert provider._worker is None
