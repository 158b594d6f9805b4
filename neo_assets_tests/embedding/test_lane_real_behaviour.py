"""How real servers behave, played by the fault server where a real one cannot do it on
demand: a model still loading (llama.cpp's 503), Ollama's runner killed behind a 500, TEI's
batch-size cap, a provider shared by two sweeps when one of them kills it, and a one-slot
server still computing work its client gave up on.

Each scenario runs the real lane, the real providers, a real socket to a supervised server
subprocess and the provider-wide slot locks (in a per-test directory).
"""

import asyncio
import hashlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neo_assets.core import codes
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.lane import EmbeddingLane
from neo_assets.embedding.provider_slots import Slots
from neo_assets.embedding.providers.ollama import OllamaProvider
from neo_assets.embedding.providers.openai_compatible import OpenAICompatibleProvider
from neo_assets.embedding.rules.lane import LaneItem, LaneSettings
from neo_assets.embedding.slot_backend import slots_for
from neo_assets.sweep.rules.fence_gate import is_durable_fence
from neo_assets.sweep.rules.outcomes import classify_sweep_outcome
from neo_assets.sweep.rules.summary import LaneSummary, SweepCounts
from neo_assets_tests.fakes.fault_server import marker
from neo_assets_tests.fakes.fence_book import InMemoryFenceBook
from neo_assets_tests.fakes.fixtures import fault_server_factory, fault_server_fixture
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor

DIM = 32
GEN = "gen-real-behaviour"
server_module = fault_server_fixture(scope="module", dimensions=DIM)
__all__ = ["fault_server_factory"]  # the fixture, used by name


@pytest.fixture
def srv(server_module: FaultServerSupervisor) -> Iterator[FaultServerSupervisor]:
    server_module.reset()
    server_module.wait_idle()
    yield server_module
    server_module.reset()
    server_module.wait_idle(timeout_s=30)


def cid(tag: str, n: int) -> str:
    return hashlib.sha256(f"{tag}-{n}".encode()).hexdigest()


def corpus(tag: str, n: int, marks: dict[int, str] | None = None) -> list[LaneItem]:
    marks = marks or {}
    return [
        LaneItem(cid(tag, i), f"def {tag}{i}(y):\n    return y * {i}\n{marks.get(i, '')}")
        for i in range(n)
    ]


def settings(**kw: Any) -> LaneSettings:
    base: dict[str, Any] = {
        "batch_size": 64,
        "max_inflight": 2,
        "recovery_initial_s": 0.05,
        "recovery_max_s": 0.3,
        "recovery_max_wait_s": 20.0,
        "call_ceiling_ms": 10_000,
    }
    base.update(kw)
    return LaneSettings(**base)


class Recorder:
    """The real provider; records each request's label and size."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.dimensions = inner.dimensions
        self.base_url = inner.base_url
        self.calls: list[tuple[str, int]] = []

    @property
    def batch_cap(self) -> int | None:
        return getattr(self.inner, "batch_cap", None)

    @batch_cap.setter
    def batch_cap(self, value: int) -> None:
        self.inner.batch_cap = value

    async def embed(self, texts: Sequence[str], scope: CancelScope, label: str) -> np.ndarray:
        self.calls.append((label, len(texts)))
        return await self.inner.embed(texts, scope, label)

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class Run:
    summary: LaneSummary
    provider: Recorder
    book: InMemoryFenceBook

    @property
    def counts(self) -> SweepCounts:
        return self.summary.counts

    def live(self) -> list[dict[str, Any]]:
        return [r for r in self.summary.errors if not is_durable_fence(r)]

    def fences(self) -> list[dict[str, Any]]:
        return [r for r in self.summary.errors if is_durable_fence(r)]


def make_provider(srv: FaultServerSupervisor, kind: str = "openai", **kw: Any) -> Recorder:
    cls = OllamaProvider if kind == "ollama" else OpenAICompatibleProvider
    return Recorder(
        cls(
            base_url=srv.base_url,
            model="fake-embed",
            dimensions=DIM,
            request_timeout_ms=kw.pop("request_timeout_ms", 10_000),
        )
    )


async def lane(
    items: list[LaneItem],
    provider: Recorder,
    lane_settings: LaneSettings,
    slots_dir: Path | None,
    book: InMemoryFenceBook,
    *,
    slots: Slots | None = None,
) -> LaneSummary:
    if slots is None:
        assert slots_dir is not None
        slots = slots_for(
            provider.name, provider.base_url, provider.model, lane_settings.max_inflight, slots_dir
        )
    return await asyncio.wait_for(
        EmbeddingLane(
            provider=provider,
            settings=lane_settings,
            generation=GEN,
            fence_book=book,
            write_batch=lambda batch, vectors: None,
            cancel_scope=CancelScope(label="real-behaviour"),
            clock=lambda: 1_700_000_000.0,
            slots=slots,
        ).run(items),
        120,
    )


def sweep(
    srv: FaultServerSupervisor,
    items: list[LaneItem],
    tmp_path: Path,
    *,
    lane_settings: LaneSettings | None = None,
    provider: Recorder | None = None,
    kind: str = "openai",
    during: Any = None,
) -> Run:
    provider = provider or make_provider(srv, kind)
    book = InMemoryFenceBook()

    async def main() -> LaneSummary:
        try:
            task = asyncio.ensure_future(
                lane(items, provider, lane_settings or settings(), tmp_path / "slots", book)
            )
            if during is not None:
                await during(provider)
            return await task
        finally:
            await provider.aclose()

    summary = asyncio.run(main())
    run = Run(summary, provider, book)
    c = run.counts
    assert c.offered == c.embedded + c.fenced_poison + c.fenced_undeliverable + c.deferred
    assert c.requests == len(provider.calls)
    return run


# ---------------------------------------------------------------------------- loading
def test_a_provider_loading_its_model_is_waited_for_and_nothing_is_concluded(
    srv: FaultServerSupervisor, tmp_path: Path
) -> None:
    srv.configure(mode="loading")

    async def load_after_probes(provider: Recorder) -> None:
        for _ in range(3000):
            if sum(1 for label, _ in provider.calls if label == "recovery-probe") >= 4:
                break
            await asyncio.sleep(0.01)
        await asyncio.to_thread(srv.configure, mode="answer")

    run = sweep(
        srv,
        corpus("load", 100),
        tmp_path,
        lane_settings=settings(circuit_threshold=2),
        during=load_after_probes,
    )
    assert run.counts.embedded == 100
    assert run.live() == []
    assert run.book.log == []
    # the loading batches went again whole: no single dispatch, no isolation
    assert {label for label, _ in run.provider.calls} == {"embed-batch", "recovery-probe"}
    assert classify_sweep_outcome(run.summary.errors).outcome == codes.OUTCOME_COMPLETE


def test_a_provider_loading_past_the_bound_defers_with_its_own_code(
    srv: FaultServerSupervisor, tmp_path: Path
) -> None:
    srv.configure(mode="loading")
    run = sweep(
        srv,
        corpus("slow-load", 70),
        tmp_path,
        lane_settings=settings(
            circuit_threshold=1,
            recovery_initial_s=0.02,
            recovery_max_s=0.05,
            recovery_max_wait_s=0.1,
            loading_max_wait_s=0.4,
        ),
    )
    assert run.book.log == []
    assert {r["code"] for r in run.live()} == {codes.KB_VECTOR_EMBED_PROVIDER_LOADING}
    assert run.counts.deferred == 70
    verdict = classify_sweep_outcome(run.summary.errors)
    assert verdict.outcome == codes.OUTCOME_DEFERRED
    assert verdict.cause_code == codes.KB_VECTOR_EMBED_PROVIDER_LOADING


# ---------------------------------------------------------------------------- Ollama death
def test_an_ollama_runner_killed_behind_a_500_is_a_death_strike_on_the_input_alone(
    srv: FaultServerSupervisor, tmp_path: Path
) -> None:
    items = corpus("oom", 40, {7: marker("runner_died")})
    run = sweep(srv, items, tmp_path, kind="ollama")
    strikes = run.book.strike_records(GEN)
    assert set(strikes) == {cid("oom", 7)}
    assert strikes[cid("oom", 7)].kind == "death"
    assert run.counts.embedded == 39
    assert {r["code"] for r in run.live()} == {codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED}
    assert run.fences() == []
    assert classify_sweep_outcome(run.summary.errors).outcome == codes.OUTCOME_DEFERRED


# ---------------------------------------------------------------------------- batch cap
def test_a_batch_cap_is_learned_once_and_kept_for_the_provider(
    srv: FaultServerSupervisor, tmp_path: Path
) -> None:
    srv.configure(max_batch=16)
    provider = make_provider(srv)
    first = sweep(srv, corpus("cap", 200), tmp_path, provider=provider)
    assert first.counts.embedded == 200
    assert first.live() == [] and first.book.log == []
    labels = {label for label, _ in first.provider.calls}
    assert labels == {"embed-batch"}  # no bisection, no single dispatch
    # the refused first batches (max_inflight of them), then ceil(200 / 16) = 13
    assert first.counts.requests <= 2 + 13
    assert max(size for label, size in first.provider.calls[2:]) <= 16
    assert provider.batch_cap == 16
    # the next sweep with the same provider starts at the cap: not one refusal
    second_provider = Recorder(provider.inner)
    second = sweep(srv, corpus("cap2", 200), tmp_path, provider=second_provider)
    assert second.counts.embedded == 200
    assert second.counts.requests == 13


# ---------------------------------------------------------------------------- attribution
def sweeps_sharing_a_killed_provider(
    srv: FaultServerSupervisor, slots_of: Callable[[str], Slots]
) -> None:
    """B's two batches are in flight when A's batch kills the server; both sweeps then
    send their suspects one by one at the same time, and A's killer kills it again while
    B's inputs are being answered. Only a request alone at the provider (every slot held,
    by any sweep: ``slots_of(tag)`` is each sweep's view of the slots) may be charged with
    the death. Asserts that only the killer was struck."""
    srv.configure(latency_per_input_s=0.1)
    killer = LaneItem(cid("a", 999), f"def killer():\n    pass\n{marker('kill')}")
    work = {"a": [killer, *corpus("a", 7)], "b": corpus("b", 16)}
    books = {"a": InMemoryFenceBook(), "b": InMemoryFenceBook()}
    results: dict[str, LaneSummary] = {}
    b_started = threading.Event()

    def run(tag: str) -> None:
        async def main() -> None:
            provider = make_provider(srv)
            try:
                if tag == "a":  # A sends its killer while B's work is in flight
                    await asyncio.to_thread(b_started.wait, 10)
                    await asyncio.sleep(0.3)
                else:
                    b_started.set()
                results[tag] = await lane(
                    work[tag],
                    provider,
                    settings(batch_size=8, max_inflight=2),
                    None,
                    books[tag],
                    slots=slots_of(tag),
                )
            finally:
                await provider.aclose()

        asyncio.run(main())

    threads = [threading.Thread(target=run, args=(tag,)) for tag in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    assert srv.restarts >= 2  # the batch, then the killer alone
    assert books["b"].strike_records(GEN) == {}, "an innocent of the other sweep was struck"
    assert set(books["a"].strike_records(GEN)) == {killer.chunk_id}
    assert results["b"].counts.embedded == 16
    assert results["a"].counts.embedded == 7


def test_two_sweeps_sharing_a_provider_killed_by_one_strike_only_the_killer(
    tmp_path: Path, fault_server_factory: Any
) -> None:
    srv = fault_server_factory(dimensions=DIM, restart=True, restart_delay_s=0.3)
    slots_dir = tmp_path / "slots"
    sweeps_sharing_a_killed_provider(
        srv, lambda tag: slots_for("openai_compatible", srv.base_url, "fake-embed", 2, slots_dir)
    )


def test_an_input_queued_behind_abandoned_work_is_not_struck(
    srv: FaultServerSupervisor, tmp_path: Path
) -> None:
    # One slot, and work goes on after its client gave up (llama.cpp's way): the batch
    # (12 × 0.25 s) passes the 1 s ceiling, and each input alone takes 0.25 s.
    srv.configure(slots=1, finish_abandoned=True, latency_per_input_s=0.25)
    run = sweep(
        srv,
        corpus("queued", 12),
        tmp_path,
        lane_settings=settings(max_inflight=1, call_ceiling_ms=1_000, batch_size=12),
    )
    assert run.book.strike_records(GEN) == {}
    assert run.counts.embedded == 12
    assert run.live() == []
    assert ("drain-probe", 1) in run.provider.calls
