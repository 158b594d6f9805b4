"""The embedding lane against the real fault-injecting server subprocess.

The server (``neo_assets_tests/fakes/fault_server.py``) speaks the OpenAI-compatible
protocol, runs under a supervisor that restarts it after it dies, and applies a fault per
input marker. The lane talks to it through the real ``OpenAICompatibleProvider`` and
writes to a real Chroma collection, so every failure below travels the real path:
socket → httpx → classification → lane verdict → durable fence book → Chroma.

Where a scenario needs an input to behave one way inside a batch and another way alone
(to reach a particular attribution site), the test flips the server's control file at
the moment the lane sends that request (``Spy.before``); the server still decides, per
request, from what it receives.
"""

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neo_assets.core import codes
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.lane import EmbeddingLane
from neo_assets.embedding.providers.openai_compatible import OpenAICompatibleProvider
from neo_assets.embedding.rules.lane import LaneItem, LaneSettings
from neo_assets.embedding.rules.lane_evidence import isolation_request_bound
from neo_assets.store.chroma_store import ChromaStore, make_client
from neo_assets.sweep.rules.fence_gate import is_durable_fence
from neo_assets.sweep.rules.outcomes import classify_sweep_outcome
from neo_assets.sweep.rules.summary import LaneSummary, SweepCounts
from neo_assets_tests.fakes.fault_server import marker
from neo_assets_tests.fakes.fence_book import InMemoryFenceBook
from neo_assets_tests.fakes.fixtures import fault_server_fixture
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor

DIM = 32
GEN = "gen-fault"
server_module = fault_server_fixture(scope="module", dimensions=DIM)


@pytest.fixture
def srv(server_module: FaultServerSupervisor) -> Iterator[FaultServerSupervisor]:
    server_module.reset()
    server_module.wait_idle()
    yield server_module
    server_module.reset()


@pytest.fixture
def store(tmp_path: Path) -> ChromaStore:
    return ChromaStore(make_client(persist_dir=tmp_path / "chroma"), "neo-knowledge-base")


def cid(n: int) -> str:
    return hashlib.sha256(f"fault-chunk-{n}".encode()).hexdigest()


def corpus(n: int, marks: dict[int, str] | None = None) -> list[LaneItem]:
    marks = marks or {}
    return [
        LaneItem(cid(i), f"def g{i}(y):\n    return y * {i}\n{marks.get(i, '')}") for i in range(n)
    ]


def lane_settings(**kw: Any) -> LaneSettings:
    base: dict[str, Any] = {
        "batch_size": 64,
        "max_inflight": 2,
        "recovery_initial_s": 0.05,
        "recovery_max_s": 0.5,
        "recovery_max_wait_s": 20.0,
        "call_ceiling_ms": 10_000,
    }
    base.update(kw)
    return LaneSettings(**base)


class Spy:
    """The real provider, recording each request and running ``before`` ahead of it."""

    def __init__(
        self,
        inner: OpenAICompatibleProvider,
        before: Callable[[list[str], str], Awaitable[None]] | None = None,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.dimensions = inner.dimensions
        self.before = before
        self.calls: list[tuple[str, list[str]]] = []

    async def embed(self, texts: Sequence[str], cancel_scope: CancelScope, label: str) -> Any:
        self.calls.append((label, list(texts)))
        if self.before is not None:
            await self.before(list(texts), label)
        return await self.inner.embed(texts, cancel_scope, label)

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class Result:
    summary: LaneSummary
    spy: Spy
    book: InMemoryFenceBook
    written: set[str] = field(default_factory=set)

    @property
    def counts(self) -> SweepCounts:
        return self.summary.counts

    def fenced(self, disposition: str) -> set[str]:
        return {
            r["details"]["chunkId"]
            for r in self.summary.errors
            if is_durable_fence(r) and r["details"]["disposition"] == disposition
        }

    def live(self) -> list[dict[str, Any]]:
        return [r for r in self.summary.errors if not is_durable_fence(r)]


def run_sweep(
    srv: FaultServerSupervisor,
    items: list[LaneItem],
    store: ChromaStore,
    *,
    book: InMemoryFenceBook | None = None,
    settings: LaneSettings | None = None,
    before: Callable[[list[str], str], Awaitable[None]] | None = None,
    during: Callable[[CancelScope, Spy], Awaitable[None]] | None = None,
    request_timeout_ms: int = 10_000,
    write_batch: Callable[[list[LaneItem], np.ndarray], None] | None = None,
) -> Result:
    book = book if book is not None else InMemoryFenceBook()
    written: set[str] = set()

    def write(batch: list[LaneItem], vectors: np.ndarray) -> None:
        store.add(
            [i.chunk_id for i in batch],
            vectors,
            [i.text for i in batch],
            [{"tenantId": "acme", "repoSlug": "widgets"} for _ in batch],
        )
        written.update(i.chunk_id for i in batch)

    async def main() -> tuple[LaneSummary, Spy]:
        provider = OpenAICompatibleProvider(
            base_url=srv.base_url,
            model="fake-embed",
            dimensions=DIM,
            request_timeout_ms=request_timeout_ms,
        )
        spy = Spy(provider, before)
        scope = CancelScope(label="fault-sweep")
        try:
            lane = EmbeddingLane(
                provider=spy,
                settings=settings or lane_settings(),
                generation=GEN,
                fence_book=book,
                write_batch=write_batch or write,
                cancel_scope=scope,
                clock=lambda: 1_700_000_000.0,
            ).run(items)
            if during is None:
                return await asyncio.wait_for(lane, 120), spy
            task = asyncio.ensure_future(lane)
            await during(scope, spy)
            return await asyncio.wait_for(task, 120), spy
        finally:
            await provider.aclose()

    summary, spy = asyncio.run(main())
    result = Result(summary, spy, book, written)
    counts = result.counts
    assert counts.offered == (
        counts.embedded + counts.fenced_poison + counts.fenced_undeliverable + counts.deferred
    )
    assert counts.requests == len(spy.calls)
    return result


def configure(srv: FaultServerSupervisor, **changes: Any) -> Awaitable[None]:
    return asyncio.to_thread(srv.configure, **changes)


def killer_text(n: int) -> str:
    return f"def killer{n}():\n    pass\n{marker('kill')}"


# ---------------------------------------------------------------------------- deaths
def test_killer_alone_strikes_then_graduates_in_two_sweeps_and_is_never_poison(
    srv: FaultServerSupervisor, store: ChromaStore
) -> None:
    book = InMemoryFenceBook()
    killer = [LaneItem(cid(0), killer_text(0))]
    kills = srv.stats().get("kills", 0)
    restarts = srv.restarts
    first = run_sweep(srv, killer, store, book=book)
    assert first.counts.requests == 1  # no request spent proving liveness
    assert [r["code"] for r in first.live()] == [codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED]
    assert list(first.summary.strikes) == [
        {"chunkId": cid(0), "kind": "death", "strikes": 1, "threshold": 2}
    ]
    assert book.fence_records(GEN) == {}

    srv.wait_for_restarts(restarts + 1)  # the next sweep comes later, the provider is back
    second = run_sweep(srv, killer, store, book=book)
    assert second.counts.requests == 1
    assert second.fenced(codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY) == {cid(0)}
    assert second.fenced(codes.DISPOSITION_PROVEN_CONTENT_POISON) == set()
    fence = book.fence_records(GEN)[cid(0)]
    assert fence.receipt["evidenceCode"] == codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
    assert fence.receipt["strikeKind"] == "death"
    assert classify_sweep_outcome(second.summary.errors).outcome == codes.OUTCOME_COMPLETE
    srv.wait_for(lambda s: s.get("kills", 0) >= kills + 2, what="two kills")


def test_corpus_with_a_killer_embeds_every_other_chunk_in_the_first_sweep(
    srv: FaultServerSupervisor, store: ChromaStore
) -> None:
    book = InMemoryFenceBook()
    items = corpus(150)
    items[70] = LaneItem(cid(70), killer_text(70))
    restarts = srv.restarts
    first = run_sweep(srv, items, store, book=book, settings=lane_settings(batch_size=32))
    assert first.counts.embedded == 149
    assert store.count() == 149
    assert first.written == {i.chunk_id for i in items} - {cid(70)}
    assert first.fenced(codes.DISPOSITION_PROVEN_CONTENT_POISON) == set()
    assert book.strike_records(GEN)[cid(70)].count == 1
    recovered = book.strike_records(GEN)[cid(70)].receipt["recoveredBy"]
    assert recovered is not None and recovered["source"] == "input"

    srv.wait_for_restarts(restarts + 2)  # the killer died twice: in its batch, then alone
    second = run_sweep(srv, [items[70]], store, book=book)
    assert second.counts.requests == 1
    assert second.fenced(codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY) == {cid(70)}
    receipt = book.fence_records(GEN)[cid(70)].receipt
    assert receipt["suspect"]["chars"] == len(items[70].text)
    assert receipt["recoveredBy"] == recovered


def test_provider_death_mid_bisection_aborts_isolation_and_poisons_only_content(
    srv: FaultServerSupervisor, store: ChromaStore
) -> None:
    items = corpus(32)
    items[0] = LaneItem(cid(0), items[0].text + marker("bad_request"))
    long_text = "def long_killer():\n" + "    x = 1\n" * 60
    items[20] = LaneItem(cid(20), long_text)

    async def arm_killer(texts: list[str], label: str) -> None:
        # The first batch fails on content; from the bisection on, the long input kills.
        if label == "isolation-bisect" and srv.control().get("kill_over_chars") is None:
            await configure(srv, kill_over_chars=len(long_text) - 1)

    result = run_sweep(srv, items, store, before=arm_killer)
    assert result.fenced(codes.DISPOSITION_PROVEN_CONTENT_POISON) == {cid(0)}
    assert cid(20) not in result.fenced(codes.DISPOSITION_PROVEN_CONTENT_POISON)
    assert result.counts.embedded == 30  # the remainder was not quarantined
    assert result.book.strike_records(GEN)[cid(20)].kind == "death"
    assert any("isolation aborted" in e["message"] for e in result.summary.events)


def test_provider_death_at_a_bisection_leaf_is_a_strike_never_poison(
    srv: FaultServerSupervisor, store: ChromaStore
) -> None:
    items = corpus(32)
    suspect = "def suspect():\n" + "    y = 2\n" * 60 + marker("bad_request")
    items[9] = LaneItem(cid(9), suspect)

    async def kill_when_alone(texts: list[str], label: str) -> None:
        # Inside a batch the suspect answers 400; dispatched alone it kills the server.
        if texts == [suspect]:
            await configure(srv, kill_over_chars=len(suspect) - 1)

    result = run_sweep(srv, items, store, before=kill_when_alone)
    assert result.fenced(codes.DISPOSITION_PROVEN_CONTENT_POISON) == set()
    assert result.book.fence_records(GEN) == {}
    assert result.book.strike_records(GEN)[cid(9)].kind == "death"
    assert result.counts.embedded == 31


def test_single_input_death_after_its_paired_control_is_a_strike_never_poison(
    srv: FaultServerSupervisor, store: ChromaStore
) -> None:
    suspect = "def lone():\n" + "    z = 3\n" * 60 + marker("bad_request")
    seen: list[str] = []

    async def kill_on_second_try(texts: list[str], label: str) -> None:
        seen.append(label)
        if texts == [suspect] and label == "embed-single-again":
            await configure(srv, kill_over_chars=len(suspect) - 1)

    result = run_sweep(srv, [LaneItem(cid(1), suspect)], store, before=kill_on_second_try)
    assert seen == ["embed-single", "isolation-control", "embed-single-again"]
    assert result.book.fence_records(GEN) == {}
    assert result.book.strike_records(GEN)[cid(1)].kind == "death"


# ---------------------------------------------------------------------------- refused
def test_connection_refused_fences_nothing_and_strikes_nothing(
    srv: FaultServerSupervisor, store: ChromaStore
) -> None:
    srv.refuse()
    settings = lane_settings(recovery_initial_s=0.01, recovery_max_s=0.02, recovery_max_wait_s=0.2)
    result = run_sweep(srv, corpus(80), store, settings=settings)
    assert result.book.log == []
    assert {r["code"] for r in result.live()} == {codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE}
    assert result.counts.deferred == 80
    assert store.count() == 0


def test_refused_until_the_provider_listens_again_then_everything_is_embedded(
    srv: FaultServerSupervisor, store: ChromaStore
) -> None:
    srv.refuse()

    async def resume_after_probes(scope: CancelScope, spy: Spy) -> None:
        while sum(1 for label, _ in spy.calls if label == "recovery-probe") < 2:
            await asyncio.sleep(0.01)
        await asyncio.to_thread(srv.resume)

    result = run_sweep(srv, corpus(80), store, during=resume_after_probes)
    assert result.book.log == []
    assert result.counts.embedded == 80
    assert result.live() == []


# ---------------------------------------------------------------------------- content
def test_content_failure_is_isolated_to_exactly_the_bad_input(
    srv: FaultServerSupervisor, store: ChromaStore
) -> None:
    items = corpus(64, {37: marker("bad_request")})
    before = srv.stats().get("requests_received", 0)
    result = run_sweep(srv, items, store)
    assert result.fenced(codes.DISPOSITION_PROVEN_CONTENT_POISON) == {cid(37)}
    assert result.counts.embedded == 63
    extra = result.counts.requests - 1
    assert extra <= isolation_request_bound(64) == 14
    assert srv.stats()["requests_received"] - before == result.counts.requests
    assert classify_sweep_outcome(result.summary.errors).outcome == codes.OUTCOME_COMPLETE


def test_llama_cpp_too_large_500_is_geometry_never_poison(
    srv: FaultServerSupervisor, store: ChromaStore
) -> None:
    # llama.cpp's 500 "input is too large to process. increase the physical batch size",
    # over real HTTP: the input is found by bisection and fenced at the geometry.
    items = corpus(64, {37: marker("too_large")})
    result = run_sweep(srv, items, store)
    assert result.fenced(codes.DISPOSITION_PROVEN_CONTENT_POISON) == set()
    assert result.fenced(codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY) == {cid(37)}
    assert result.counts.embedded == 63
    assert result.counts.requests - 1 <= isolation_request_bound(64)
    (fence,) = [f for f in result.summary.errors if f["details"].get("chunkId") == cid(37)]
    receipt = fence["details"]["receipt"]
    assert receipt["evidenceCode"] == codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE
    assert receipt["status"] == 500 and "too large" in receipt["providerMessage"]
    assert receipt["band"]["bandTokens"] > 0
    assert classify_sweep_outcome(result.summary.errors).outcome == codes.OUTCOME_COMPLETE


# ---------------------------------------------------------------------------- store
def test_a_chroma_write_error_mid_sweep_fences_nothing(
    srv: FaultServerSupervisor, store: ChromaStore
) -> None:
    calls = {"n": 0}

    def write_then_lose_the_collection(batch: list[LaneItem], vectors: np.ndarray) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            store.client.delete_collection(store.collection_name)  # a real store error next
        store.add(
            [i.chunk_id for i in batch],
            vectors,
            [i.text for i in batch],
            [{"tenantId": "acme"} for _ in batch],
        )

    result = run_sweep(
        srv,
        corpus(256),
        store,
        settings=lane_settings(max_inflight=1),
        write_batch=write_then_lose_the_collection,
    )
    assert result.book.log == []
    assert result.counts.embedded == 64
    codes_seen = {r["code"] for r in result.live()}
    assert codes_seen == {codes.KB_VECTOR_EMBED_WRITE_ERROR}
    assert result.counts.deferred == 192


# ---------------------------------------------------------------------------- deadlines
def test_cancelling_in_flight_disconnects_and_starts_nothing_more(
    srv: FaultServerSupervisor, store: ChromaStore
) -> None:
    items = corpus(64 * 4, {0: marker("hang", 30), 64: marker("hang", 30)})
    base = srv.stats()

    async def cancel_in_flight(scope: CancelScope, spy: Spy) -> None:
        await asyncio.to_thread(
            srv.wait_for,
            lambda s: s.get("open_requests", 0) >= 2,
            10.0,
            "two requests held",
        )
        scope.cancel(codes.ABORT_ERR)

    result = run_sweep(srv, items, store, during=cancel_in_flight)
    after = srv.wait_for(
        lambda s: s.get("client_disconnects", 0) >= base.get("client_disconnects", 0) + 2,
        what="the server saw both disconnects",
    )
    assert after["requests_received"] - base.get("requests_received", 0) == 2
    assert result.counts.requests == 2
    (row,) = result.live()
    assert row["code"] == codes.KB_VECTOR_EMBED_ABORTED
    assert row["details"]["causeCode"] == codes.ABORT_ERR
    assert result.book.log == []


def test_provider_deadline_on_a_single_input_graduates_as_timeout(
    srv: FaultServerSupervisor, store: ChromaStore
) -> None:
    book = InMemoryFenceBook()
    slow = [LaneItem(cid(5), "def slow():\n    pass\n" + marker("hang", 5))]
    first = run_sweep(srv, slow, store, book=book, request_timeout_ms=300)
    (row,) = first.live()
    assert row["code"] == codes.KB_VECTOR_EMBED_TIMEOUT
    assert row["details"]["causeCode"] == codes.OPENAI_COMPATIBLE_REQUEST_TIMEOUT
    second = run_sweep(srv, slow, store, book=book, request_timeout_ms=300)
    assert second.fenced(codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY) == {cid(5)}
    assert book.fence_records(GEN)[cid(5)].receipt["strikeKind"] == "timeout"
    assert second.fenced(codes.DISPOSITION_PROVEN_CONTENT_POISON) == set()
