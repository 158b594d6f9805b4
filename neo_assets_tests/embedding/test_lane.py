"""The embedding lane against an in-process scripted provider.

Every verdict path of the lane (``neo_assets/embedding/lane.py`` and its parts) with a
provider that fails on purpose, per input: content failures isolated by bisection within
the request bound, deaths on the bisection path and on the single-input path that never
produce poison, death and timeout strikes that graduate across sweeps even when the killer
is the only work left, refused connections that conclude nothing, the circuit, write errors, and
cancellation with zero further requests. The same key scenarios run against the real
fault-injecting server subprocess in ``test_lane_fault_server.py``.
"""

import asyncio
import hashlib
import re
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from neo_assets.core import codes
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.failures import EmbedFailure
from neo_assets.embedding.lane import EmbeddingLane
from neo_assets.embedding.providers.hashing import hash_embed
from neo_assets.embedding.rules.lane import (
    FenceRecord,
    LaneItem,
    LaneSettings,
    StrikeRecord,
    admission_band,
)
from neo_assets.embedding.rules.lane_evidence import (
    KB_VECTOR_EMBED_CALL_CEILING,
    isolation_request_bound,
)
from neo_assets.embedding.vectors import DimensionMismatchError, validate_vectors
from neo_assets.sweep.rules.fence_gate import is_durable_fence
from neo_assets.sweep.rules.outcomes import classify_sweep_outcome
from neo_assets.sweep.rules.summary import LaneSummary, SweepCounts
from neo_assets_tests.fakes.fence_book import InMemoryFenceBook

# ---------------------------------------------------------------------------- the fake
# An in-process EmbeddingProvider that fails on purpose, per input marker.
#
# A text containing ``@@NAME@@`` behaves as the script says for ``NAME``: a behaviour, or a
# list of behaviours consumed one per request that carries the marker (the last repeats).
# The first marker in the request (input order) decides the whole request, as a server
# processing inputs in order would. Behaviours:
#
# - ``ok``: answer.
# - ``content``: ``EmbedFailure(KB_VECTOR_EMBED_CONTENT)``.
# - ``refusal400`` / ``refusal429``: PROVIDER_REFUSAL with status 400, 429.
# - ``too_large``: a size refusal (INPUT_TOO_LARGE), as llama.cpp's 500 "input (N tokens)
#   is too large" classifies.
# - ``kill``: the provider dies mid-request: TRANSPORT_CLOSED for this request and every
#   request in flight, then CONNECTION_REFUSED for the next ``restart_requests`` requests.
# - ``kill_alone``: ``kill`` when the input is alone in the request, ``content`` otherwise.
# - ``timeout``: the provider's own deadline (TIMEOUT, cause PROVIDER_TIMEOUT).
# - ``hang``: never answers until the call's scope ends (the lane's call ceiling).
# - ``unclassified``: a failure nothing recognises.
# - ``nan``: answers with a NaN vector.
#
# ``down_for`` makes the first N requests CONNECTION_REFUSED (nothing listening), and
# ``always_down`` every request. ``requests`` records every request's texts; ``on_request``
# is called with them as each request starts.

MARKER = re.compile(r"@@([A-Za-z0-9_]+)@@")


def marked(name: str, body: str = "") -> str:
    return f"{body} @@{name}@@ payload"


class ScriptedProvider:
    name = "scripted"
    model = "scripted-v1"

    def __init__(
        self,
        script: dict[str, str | list[str]] | None = None,
        *,
        dimensions: int = 16,
        restart_requests: int = 1,
        down_for: int = 0,
        always_down: bool = False,
        latency_s: float = 0.0,
        on_request: Callable[[list[str]], None] | None = None,
        times_out_over: int | None = None,
    ) -> None:
        self.dimensions = dimensions
        self.times_out_over = times_out_over  # a request of more inputs: past its deadline
        self.script = {
            k: (list(v) if isinstance(v, list) else [v]) for k, v in (script or {}).items()
        }
        self.restart_requests = restart_requests
        self.down_for = down_for
        self.always_down = always_down
        self.latency_s = latency_s
        self.on_request = on_request
        self.requests: list[list[str]] = []
        self.completed = 0
        self.cancelled = 0
        self.epoch = 0  # bumps at every death: requests in flight across it die too
        self.closed = False

    def _behaviour(self, texts: Sequence[str]) -> str:
        for text in texts:
            for name in MARKER.findall(text):
                if name in self.script:
                    steps = self.script[name]
                    step = steps[0]
                    if len(steps) > 1:
                        steps.pop(0)
                    if step == "kill_alone":
                        return "kill" if len(texts) == 1 else "content"
                    return step
        return "ok"

    def _fail(self, code: str, label: str, **kw: object) -> EmbedFailure:
        return EmbedFailure(code, operation_label=label, provider=self.name, **kw)  # type: ignore[arg-type]

    async def embed(
        self, texts: Sequence[str], cancel_scope: CancelScope, operation_label: str
    ) -> np.ndarray:
        cancel_scope.raise_if_cancelled()
        texts = list(texts)
        self.requests.append(texts)
        if self.on_request is not None:
            self.on_request(texts)
        if self.always_down or self.down_for > 0:
            self.down_for = max(0, self.down_for - 1)
            raise self._fail(codes.KB_VECTOR_EMBED_CONNECTION_REFUSED, operation_label)
        epoch = self.epoch
        try:
            await cancel_scope.sleep(self.latency_s)
        except BaseException:
            self.cancelled += 1
            raise
        behaviour = self._behaviour(texts)
        if self.times_out_over is not None and len(texts) > self.times_out_over:
            behaviour = "timeout"  # a slow server: too much work per request, any inputs
        if behaviour == "kill":
            self.epoch += 1
            self.down_for = self.restart_requests
            raise self._fail(codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED, operation_label)
        if self.epoch != epoch:
            raise self._fail(codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED, operation_label)
        if behaviour == "content":
            raise self._fail(codes.KB_VECTOR_EMBED_CONTENT, operation_label)
        if behaviour == "refusal400":
            raise self._fail(codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL, operation_label, status=400)
        if behaviour == "refusal429":
            raise self._fail(codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL, operation_label, status=429)
        if behaviour == "too_large":
            raise self._fail(
                codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE,
                operation_label,
                status=500,
                detail="input (612 tokens) is too large to process. increase the physical "
                "batch size",
            )
        if behaviour == "timeout":
            raise self._fail(
                codes.KB_VECTOR_EMBED_TIMEOUT,
                operation_label,
                provider_code=codes.PROVIDER_TIMEOUT,
            )
        if behaviour == "hang":
            try:
                await cancel_scope.sleep(3600)
            except BaseException:
                self.cancelled += 1
                raise
        if behaviour == "unclassified":
            raise RuntimeError("something nobody recognises")
        vectors = np.vstack([hash_embed(t, self.dimensions) for t in texts])
        if behaviour == "nan":
            vectors[0, 0] = np.nan
        self.completed += 1
        return vectors

    async def aclose(self) -> None:
        self.closed = True

    def requests_with(self, name: str) -> list[list[str]]:
        token = f"@@{name}@@"
        return [r for r in self.requests if any(token in t for t in r)]


# ---------------------------------------------------------------------------- harness
GEN = "gen-a"
DIM = 16


def cid(n: int) -> str:
    return hashlib.sha256(f"chunk-{n}".encode()).hexdigest()


def corpus(n: int, marks: dict[int, str] | None = None) -> list[LaneItem]:
    marks = marks or {}
    items = []
    for i in range(n):
        text = f"def f{i}(x):\n    return x + {i}\n"
        if i in marks:
            text = marked(marks[i], text)
        items.append(LaneItem(chunk_id=cid(i), text=text))
    return items


def fast_settings(**kw: object) -> LaneSettings:
    base: dict[str, object] = {
        "batch_size": 64,
        "max_inflight": 2,
        "recovery_initial_s": 0.0,
        "recovery_max_s": 0.0,
        "recovery_max_wait_s": 1.0,
        "call_ceiling_ms": 10_000,
    }
    base.update(kw)
    return LaneSettings(**base)  # type: ignore[arg-type]


class Store:
    """The write side: records every batch (called from a worker thread)."""

    def __init__(self, fail_on_call: int | None = None) -> None:
        self.batches: list[list[str]] = []
        self.calls = 0
        self.fail_on_call = fail_on_call
        self.threads: set[str] = set()

    def write(self, items: list[LaneItem], vectors: np.ndarray) -> None:
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        assert vectors.shape == (len(items), DIM)
        assert np.isfinite(vectors).all()
        if self.fail_on_call is not None and self.calls == self.fail_on_call:
            raise OSError("disk full")
        self.batches.append([i.chunk_id for i in items])

    @property
    def written(self) -> set[str]:
        return {c for b in self.batches for c in b}


@dataclass
class Sweep:
    summary: LaneSummary
    provider: ScriptedProvider
    store: Store
    book: InMemoryFenceBook
    progress: list[tuple[int, int, int]] = field(default_factory=list)

    @property
    def counts(self) -> SweepCounts:
        return self.summary.counts

    def fences(self, disposition: str | None = None) -> list[dict[str, Any]]:
        rows = [r for r in self.summary.errors if is_durable_fence(r)]
        if disposition is not None:
            rows = [r for r in rows if r["details"]["disposition"] == disposition]
        return rows

    def fenced_ids(self, disposition: str) -> set[str]:
        return {r["details"]["chunkId"] for r in self.fences(disposition)}

    def live(self) -> list[dict[str, Any]]:
        return [r for r in self.summary.errors if not is_durable_fence(r)]

    def deferred_ids(self, code: str | None = None) -> set[str]:
        return {
            c
            for r in self.live()
            if code is None or r["code"] == code
            for c in r["details"]["chunkIds"]
        }


def sweep(
    items: list[LaneItem],
    provider: ScriptedProvider,
    *,
    settings: LaneSettings | None = None,
    book: InMemoryFenceBook | None = None,
    store: Store | None = None,
    scope: CancelScope | None = None,
    generation: str = GEN,
    during: Callable[[CancelScope, ScriptedProvider], Awaitable[None]] | None = None,
) -> Sweep:
    book = book if book is not None else InMemoryFenceBook()
    store = store if store is not None else Store()
    progress: list[tuple[int, int, int]] = []
    settings = settings or fast_settings()

    async def main() -> dict[str, Any]:
        cancel_scope = scope if scope is not None else CancelScope(label="test-sweep")
        lane = EmbeddingLane(
            provider=provider,
            settings=settings,
            generation=generation,
            fence_book=book,
            write_batch=store.write,
            cancel_scope=cancel_scope,
            clock=lambda: 1_700_000_000.0,
            progress=lambda d, t, e: progress.append((d, t, e)),
        ).run(items)
        if during is None:
            return await asyncio.wait_for(lane, 60)
        task = asyncio.ensure_future(lane)
        await during(cancel_scope, provider)
        return await asyncio.wait_for(task, 60)

    summary = asyncio.run(main())
    result = Sweep(summary, provider, store, book, progress)
    check_invariants(result, items)
    return result


def check_invariants(result: Sweep, items: list[LaneItem]) -> None:
    """What every summary must satisfy, whatever happened."""
    counts = result.counts
    assert set(counts.to_doc()) == {
        "offered",
        "embedded",
        "alreadyFenced",
        "fencedPoison",
        "fencedUndeliverable",
        "deferred",
        "requests",
    }
    assert counts.offered + counts.already_fenced == len({i.chunk_id for i in items})
    assert counts.offered == (
        counts.embedded + counts.fenced_poison + counts.fenced_undeliverable + counts.deferred
    )
    assert counts.embedded == len(result.store.written & {i.chunk_id for i in items})
    assert counts.requests == len(result.provider.requests)
    assert result.summary.generation in (GEN, "gen-b")
    for row in result.summary.errors:
        assert set(row) == {"code", "message", "details"}
    # Poison is only ever backed by content evidence.
    for row in result.fences(codes.DISPOSITION_PROVEN_CONTENT_POISON):
        assert row["details"]["evidenceCode"] == codes.KB_VECTOR_EMBED_CONTENT
        assert row["code"] == row["details"]["reasonCode"]
    # Nothing is both written and fenced or deferred in this sweep.
    fenced_now = {
        r["details"]["chunkId"] for r in result.fences() if r["details"]["recordedThisSweep"]
    }
    assert not (fenced_now & result.store.written)
    assert not (result.deferred_ids() & result.store.written)
    assert counts.deferred == sum(r["details"]["chunkCount"] for r in result.live())
    # Progress never runs past its total, and the embedded count only grows.
    assert all(done <= total for done, total, _ in result.progress)
    embedded = [e for _, _, e in result.progress]
    assert embedded == sorted(embedded)
    assert result.provider.closed is False  # the caller owns the provider's lifetime


def extra_requests_for(n: int, bad: int, behaviour: str = "content") -> tuple[int, Sweep]:
    provider = ScriptedProvider({"BAD": behaviour}, dimensions=DIM)
    result = sweep(corpus(n, {bad: "BAD"}), provider, settings=fast_settings(batch_size=n))
    return result.counts.requests - 1, result


# ---------------------------------------------------------------------------- happy path
def test_happy_path_embeds_every_batch_and_writes_each_at_once() -> None:
    # A provider slower than the store, one request at a time: each batch is written
    # alone, as soon as it is embedded.
    provider = ScriptedProvider(dimensions=DIM, latency_s=0.05)
    result = sweep(corpus(150), provider, settings=fast_settings(max_inflight=1))
    assert result.counts.embedded == 150
    assert result.counts.requests == 3
    assert [len(b) for b in result.store.batches] == [64, 64, 22]
    assert result.summary.errors == ()
    assert result.summary.strikes == ()
    assert classify_sweep_outcome(result.summary.errors).outcome == codes.OUTCOME_COMPLETE
    # Writes ran in worker threads, never on the event loop's thread.
    assert result.store.threads and threading.main_thread().name not in result.store.threads
    assert result.progress[-1] == (3, 3, 150)


class SlowStore(Store):
    """A store slower than the provider: batches finish while a write is running."""

    def write(self, items: list[LaneItem], vectors: np.ndarray) -> None:
        time.sleep(0.05)
        super().write(items, vectors)


def test_batches_that_finish_during_a_slow_write_go_together_in_the_next_one() -> None:
    items = corpus(64 * 12)
    store = SlowStore()
    result = sweep(items, ScriptedProvider(dimensions=DIM), store=store)
    assert result.counts.embedded == len(items) and result.counts.requests == 12
    # Fewer, larger writes, never more than the queue holds plus the batch that woke the
    # writer; every id written exactly once.
    assert len(store.batches) < 12
    assert max(len(b) for b in store.batches) <= 64 * (1 + fast_settings().write_queue_depth)
    written = [c for b in store.batches for c in b]
    assert sorted(written) == sorted(i.chunk_id for i in items)
    assert result.progress[-1][2] == len(items)


def test_a_failed_grouped_write_defers_every_batch_in_it_and_fences_nothing() -> None:
    items = corpus(64 * 6)
    store = SlowStore(fail_on_call=2)
    result = sweep(items, ScriptedProvider(dimensions=DIM), store=store)
    assert result.fences() == [] and result.summary.strikes == ()
    first = result.live()[0]
    assert first["code"] == codes.KB_VECTOR_EMBED_WRITE_ERROR
    assert first["details"]["chunkCount"] > 64  # the failed write held more than one batch
    assert {r["code"] for r in result.live()} == {codes.KB_VECTOR_EMBED_WRITE_ERROR}
    assert result.counts.embedded == len(store.written)
    assert result.counts.embedded + result.counts.deferred == len(items)


def test_a_lone_trailing_input_is_embedded_alone() -> None:
    provider = ScriptedProvider(dimensions=DIM)
    result = sweep(corpus(65), provider)
    assert result.counts.embedded == 65
    assert sorted(len(r) for r in provider.requests) == [1, 64]


def test_duplicate_ids_are_offered_once() -> None:
    items = corpus(3)
    result = sweep(items + items[:1], ScriptedProvider(dimensions=DIM))
    assert result.counts.offered == 3
    assert result.counts.embedded == 3


# ---------------------------------------------------------------------------- admission
def test_admission_fences_an_oversized_input_without_dispatching_it() -> None:
    settings = fast_settings(context_tokens=100, admission_safety_factor=0.5, chars_per_token=2.0)
    items = corpus(5)
    big = LaneItem(chunk_id=cid(99), text="x" * 101)  # 51 tokens > band 50
    edge = LaneItem(chunk_id=cid(98), text="y" * 100)  # 50 tokens == band: admitted
    provider = ScriptedProvider(dimensions=DIM)
    result = sweep([*items, big, edge], provider, settings=settings)
    assert result.fenced_ids(codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY) == {big.chunk_id}
    assert all(big.text not in texts for texts in provider.requests)
    (row,) = result.fences()
    assert row["code"] == codes.KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY
    assert row["details"]["receipt"]["estimateTokens"] == 51
    assert row["details"]["receipt"]["bandTokens"] == 50
    assert row["details"]["observedAt"] == 1_700_000_000.0
    assert result.counts.fenced_undeliverable == 1
    assert result.counts.embedded == 6
    assert result.book.fenced_ids(GEN) == {big.chunk_id}
    assert classify_sweep_outcome(result.summary.errors).outcome == codes.OUTCOME_COMPLETE


# ---------------------------------------------------------------------------- generation
def test_a_fenced_chunk_is_not_offered_again_at_its_generation_but_is_at_a_new_one() -> None:
    items = corpus(10, {3: "BAD"})
    book = InMemoryFenceBook()
    first = sweep(items, ScriptedProvider({"BAD": "content"}, dimensions=DIM), book=book)
    assert first.fenced_ids(codes.DISPOSITION_PROVEN_CONTENT_POISON) == {cid(3)}

    # The caller passes what the collection lacks: only the poisoned chunk.
    again = ScriptedProvider({"BAD": "content"}, dimensions=DIM)
    second = sweep([items[3]], again, book=book)
    assert again.requests == []
    assert second.counts.already_fenced == 1
    assert second.counts.offered == 0
    (row,) = second.summary.errors
    assert is_durable_fence(row)
    assert row["details"]["recordedThisSweep"] is False
    assert row["details"]["chunkId"] == cid(3)
    assert classify_sweep_outcome(second.summary.errors).outcome == codes.OUTCOME_COMPLETE

    healed = ScriptedProvider(dimensions=DIM)  # the new geometry delivers it
    third = sweep([items[3]], healed, book=book, generation="gen-b")
    assert healed.requests == [[items[3].text]]
    assert third.counts.embedded == 1
    assert third.counts.already_fenced == 0


# ---------------------------------------------------------------------------- isolation
@pytest.mark.parametrize("bad", range(64))
def test_content_failure_is_isolated_to_exactly_the_bad_input_within_the_bound(bad: int) -> None:
    extra, result = extra_requests_for(64, bad)
    assert result.fenced_ids(codes.DISPOSITION_PROVEN_CONTENT_POISON) == {cid(bad)}
    assert result.counts.embedded == 63
    assert result.counts.fenced_poison == 1
    assert extra <= isolation_request_bound(64) == 14
    assert result.live() == []  # the failure was resolved within the sweep
    assert classify_sweep_outcome(result.summary.errors).outcome == codes.OUTCOME_COMPLETE
    (row,) = result.fences()
    assert row["details"]["reasonCode"] == codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON
    assert row["details"]["disposition"] == codes.DISPOSITION_PROVEN_CONTENT_POISON
    assert row["details"]["evidenceCode"] == codes.KB_VECTOR_EMBED_CONTENT


@hsettings(max_examples=60, deadline=None)
@given(st.data())
def test_isolation_bound_holds_for_any_batch_size_and_position(data: st.DataObject) -> None:
    n = data.draw(st.integers(min_value=2, max_value=64))
    bad = data.draw(st.integers(min_value=0, max_value=n - 1))
    extra, result = extra_requests_for(n, bad)
    assert extra <= isolation_request_bound(n)
    assert result.fenced_ids(codes.DISPOSITION_PROVEN_CONTENT_POISON) == {cid(bad)}


def test_a_per_input_refusal_is_content_evidence() -> None:
    extra, result = extra_requests_for(64, 17, "refusal400")
    assert result.fenced_ids(codes.DISPOSITION_PROVEN_CONTENT_POISON) == {cid(17)}
    assert extra <= 14
    receipt = result.fences()[0]["details"]["receipt"]
    assert receipt["failureCode"] == codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL
    assert receipt["pairedControl"] is True


def test_a_size_refusal_is_geometry_never_poison() -> None:
    extra, result = extra_requests_for(64, 17, "too_large")
    assert result.fenced_ids(codes.DISPOSITION_PROVEN_CONTENT_POISON) == set()
    assert result.fenced_ids(codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY) == {cid(17)}
    assert result.counts.embedded == 63 and result.counts.fenced_poison == 0
    assert extra <= 14  # found by the same bisection
    fence = result.fences()[0]["details"]
    receipt = fence["receipt"]
    assert receipt["evidenceCode"] == codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE
    assert receipt["sizeRefusal"] is True
    assert receipt["inputTokens"] == 612  # what the provider said
    assert receipt["band"]["bandTokens"] == admission_band(fast_settings())
    assert [e for e in result.book.log if e[0] != "fence"] == []  # no strike: not a death


def test_a_lone_size_refusal_needs_no_control_and_opens_no_circuit() -> None:
    provider = ScriptedProvider({"BIG": "too_large"}, dimensions=DIM)
    items = corpus(5, {0: "BIG", 1: "BIG", 2: "BIG", 3: "BIG", 4: "BIG"})
    result = sweep(items, provider, settings=fast_settings(batch_size=1, circuit_threshold=2))
    assert result.counts.requests == 5  # one each: no control, no retry, no circuit
    assert result.counts.fenced_undeliverable == 5 and result.counts.fenced_poison == 0


def test_a_rate_limit_refusal_is_never_content_evidence() -> None:
    provider = ScriptedProvider({"BAD": "refusal429"}, dimensions=DIM)
    result = sweep(corpus(8, {2: "BAD"}), provider, settings=fast_settings(circuit_threshold=3))
    assert result.fences() == []
    assert result.book.log == []
    assert cid(2) in result.deferred_ids()


def test_two_bad_inputs_are_both_isolated() -> None:
    provider = ScriptedProvider({"BAD": "content", "WORSE": "content"}, dimensions=DIM)
    result = sweep(corpus(64, {10: "BAD", 11: "WORSE"}), provider)
    assert result.fenced_ids(codes.DISPOSITION_PROVEN_CONTENT_POISON) == {cid(10), cid(11)}
    assert result.counts.embedded == 62


def test_a_failing_control_aborts_the_isolation_and_attributes_nothing() -> None:
    # Every request fails with a content-class error, the control text included: a
    # provider that refuses everything proves nothing about any one input.
    provider = ScriptedProvider(dimensions=DIM)
    provider._behaviour = lambda texts: "content"  # type: ignore[method-assign]
    result = sweep(corpus(64), provider, settings=fast_settings(circuit_threshold=3))
    assert result.fences() == []
    assert result.book.log == []
    assert result.counts.deferred == 64
    assert result.counts.requests < 20


def test_a_flaky_content_failure_that_passes_alone_is_embedded() -> None:
    provider = ScriptedProvider({"FLAKY": ["content", "ok"]}, dimensions=DIM)
    result = sweep(corpus(16, {5: "FLAKY"}), provider)
    assert result.fences() == []
    assert result.counts.embedded == 16


# ---------------------------------------------------------------------------- deaths
def test_bisection_path_provider_death_aborts_isolation_and_poisons_nothing_but_content() -> None:
    # Item 0 is bad content, item 40 kills the provider: the first request fails with the
    # content error, the bisection's right half then kills the provider mid-isolation.
    provider = ScriptedProvider({"BAD": "content", "KILL": "kill"}, dimensions=DIM)
    result = sweep(corpus(64, {0: "BAD", 40: "KILL"}), provider, settings=fast_settings())
    assert any(
        e["code"] == codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED and "isolation aborted" in e["message"]
        for e in result.summary.events
    )
    assert cid(40) not in result.fenced_ids(codes.DISPOSITION_PROVEN_CONTENT_POISON)
    assert result.fenced_ids(codes.DISPOSITION_PROVEN_CONTENT_POISON) == {cid(0)}
    # The remainder was not quarantined: every other input got through in this sweep.
    assert result.counts.embedded == 62
    assert list(result.summary.strikes) == [
        {"chunkId": cid(40), "kind": "death", "strikes": 1, "threshold": 2}
    ]


def test_bisection_leaf_death_is_a_strike_never_poison() -> None:
    # The killer fails like content inside a batch and kills the provider when alone:
    # the walk reaches it as a leaf, after a fresh success, and it dies.
    provider = ScriptedProvider({"KILL": "kill_alone"}, dimensions=DIM)
    result = sweep(corpus(64, {9: "KILL"}), provider)
    assert result.fences() == []
    assert result.counts.embedded == 63
    (strike,) = result.book.strike_records(GEN).values()
    assert (strike.chunk_id, strike.kind, strike.count) == (cid(9), "death", 1)
    assert result.deferred_ids(codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED) == {cid(9)}
    assert classify_sweep_outcome(result.summary.errors).outcome == codes.OUTCOME_DEFERRED


def test_single_input_path_death_after_a_content_failure_is_a_strike_never_poison() -> None:
    # Alone from the start: fails like content, the paired control succeeds, and the
    # input dispatched again kills the provider.
    provider = ScriptedProvider({"KILL": ["content", "kill"]}, dimensions=DIM)
    result = sweep(corpus(1, {0: "KILL"}), provider)
    assert result.fences() == []
    assert [r[0] == provider.requests[0][0] for r in provider.requests] == [True, False, True]
    (strike,) = result.book.strike_records(GEN).values()
    assert strike.kind == "death"
    assert result.deferred_ids() == {cid(0)}


def test_killer_graduates_at_threshold_within_two_sweeps_when_it_is_the_only_work() -> None:
    book = InMemoryFenceBook()
    killer = corpus(1, {0: "KILL"})
    first = sweep(killer, ScriptedProvider({"KILL": "kill"}, dimensions=DIM), book=book)
    assert first.counts.requests == 1  # no request spent proving liveness
    assert first.fences() == []
    assert list(first.summary.strikes) == [
        {"chunkId": cid(0), "kind": "death", "strikes": 1, "threshold": 2}
    ]
    assert classify_sweep_outcome(first.summary.errors).outcome == codes.OUTCOME_DEFERRED

    second = sweep(killer, ScriptedProvider({"KILL": "kill"}, dimensions=DIM), book=book)
    assert second.counts.requests == 1
    assert second.fenced_ids(codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY) == {cid(0)}
    assert second.fenced_ids(codes.DISPOSITION_PROVEN_CONTENT_POISON) == set()
    (row,) = second.fences()
    details = row["details"]
    assert details["evidenceCode"] == codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
    assert details["receipt"]["strikeKind"] == "death"
    assert details["receipt"]["strikes"] == 2
    assert details["receipt"]["suspect"]["chars"] == len(killer[0].text)
    assert details["receipt"]["recoveredBy"] is None  # nothing ever succeeded after it
    assert second.live() == []
    assert classify_sweep_outcome(second.summary.errors).outcome == codes.OUTCOME_COMPLETE

    third_provider = ScriptedProvider({"KILL": "kill"}, dimensions=DIM)
    third = sweep(killer, third_provider, book=book)
    assert third_provider.requests == []
    assert third.counts.already_fenced == 1


def test_corpus_with_a_killer_embeds_everything_else_in_the_first_sweep() -> None:
    book = InMemoryFenceBook()
    items = corpus(300, {77: "KILL"})
    provider = ScriptedProvider({"KILL": "kill"}, dimensions=DIM, restart_requests=2)
    first = sweep(items, provider, book=book)
    assert first.counts.embedded == 299
    assert first.store.written == {i.chunk_id for i in items} - {cid(77)}
    assert first.counts.deferred == 1
    assert first.fences() == []
    strike = book.strike_records(GEN)[cid(77)]
    assert strike.count == 1
    # The input whose success showed the provider healthy again is on the receipt.
    assert strike.receipt["recoveredBy"]["source"] == "input"
    assert strike.receipt["recoveredBy"]["chars"] > 0

    # Next sweep the caller offers only what is missing: the killer, alone.
    second = sweep([items[77]], ScriptedProvider({"KILL": "kill"}, dimensions=DIM), book=book)
    assert second.fenced_ids(codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY) == {cid(77)}
    receipt = second.fences()[0]["details"]["receipt"]
    assert receipt["recoveredBy"]["source"] == "input"
    assert receipt["suspect"]["chars"] == len(items[77].text)


def test_a_known_suspect_is_dispatched_alone_after_the_healthy_work() -> None:
    book = InMemoryFenceBook()
    items = corpus(130, {5: "KILL"})
    sweep(items, ScriptedProvider({"KILL": "kill"}, dimensions=DIM), book=book)
    provider = ScriptedProvider({"KILL": "kill"}, dimensions=DIM)
    second = sweep(items[:10], provider, book=book)  # the caller re-offers 10 (say)
    assert provider.requests[-1] == [items[5].text]
    assert all(items[5].text not in r for r in provider.requests[:-1])
    assert second.counts.fenced_undeliverable == 1
    assert second.counts.embedded == 9


def test_a_strike_is_durable_before_the_next_request() -> None:
    book = InMemoryFenceBook()
    seen: list[int] = []
    provider = ScriptedProvider(
        {"KILL": "kill"},
        dimensions=DIM,
        on_request=lambda texts: seen.append(len(book.log)),
    )
    items = corpus(1, {0: "KILL"}) + corpus(3)[1:]
    sweep(items, provider, book=book)
    kill_at = next(i for i, r in enumerate(provider.requests) if "@@KILL@@" in r[0] and len(r) == 1)
    assert book.log[0] == ("strike", GEN, cid(0))
    assert all(n >= 1 for n in seen[kill_at + 1 :])


def test_bystanders_of_a_concurrent_death_are_never_struck() -> None:
    # Two batches in flight; one carries the killer and both die with it.
    provider = ScriptedProvider({"KILL": "kill"}, dimensions=DIM, latency_s=0.001)
    result = sweep(corpus(128, {100: "KILL"}), provider, settings=fast_settings(max_inflight=2))
    assert set(result.book.strike_records(GEN)) == {cid(100)}
    assert result.counts.embedded == 127


def test_a_crash_between_strike_and_fence_graduates_without_a_request() -> None:
    book = InMemoryFenceBook()
    book.record_strike(GEN, StrikeRecord(cid(0), "death", 2, {"kind": "death", "strikes": 2}))
    provider = ScriptedProvider(dimensions=DIM)
    result = sweep(corpus(1), provider, book=book)
    assert provider.requests == []
    assert result.fenced_ids(codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY) == {cid(0)}


# ---------------------------------------------------------------------------- timeouts
def test_single_input_past_the_call_ceiling_accrues_timeout_strikes_and_graduates() -> None:
    settings = fast_settings(call_ceiling_ms=20)
    book = InMemoryFenceBook()
    items = corpus(1, {0: "SLOW"})
    first = sweep(
        items, ScriptedProvider({"SLOW": "hang"}, dimensions=DIM), settings=settings, book=book
    )
    (row,) = first.live()
    assert row["code"] == codes.KB_VECTOR_EMBED_TIMEOUT
    assert row["details"]["causeCode"] == KB_VECTOR_EMBED_CALL_CEILING
    assert first.provider.cancelled == 1  # the hung request was cancelled, not abandoned
    second = sweep(
        items, ScriptedProvider({"SLOW": "hang"}, dimensions=DIM), settings=settings, book=book
    )
    (fence,) = second.fences()
    assert fence["details"]["receipt"]["strikeKind"] == "timeout"
    assert fence["details"]["disposition"] == codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY


def test_a_batch_timeout_is_halved_until_only_the_slow_input_strikes() -> None:
    provider = ScriptedProvider({"SLOW": "timeout"}, dimensions=DIM)
    result = sweep(corpus(20, {4: "SLOW"}), provider)
    assert result.counts.embedded == 19
    assert set(result.book.strike_records(GEN)) == {cid(4)}
    assert result.book.strike_records(GEN)[cid(4)].kind == "timeout"
    assert result.deferred_ids(codes.KB_VECTOR_EMBED_TIMEOUT) == {cid(4)}
    assert result.live()[0]["details"]["causeCode"] == codes.PROVIDER_TIMEOUT


def test_batches_past_the_deadline_alone_are_halved_not_suspected() -> None:
    # A server too slow for 64 inputs per request at this moment (a loaded machine): one
    # at a time, each batch over 16 inputs times out. Before the fix its members became
    # suspects sent one by one (128 single requests), and any that timed out alone struck.
    provider = ScriptedProvider(dimensions=DIM, times_out_over=16)
    result = sweep(corpus(128), provider, settings=fast_settings(max_inflight=1))
    assert result.counts.embedded == 128
    assert result.book.log == []
    assert result.summary.strikes == ()
    assert result.live() == []
    assert [len(r) for r in provider.requests] == [64, 32] + [16] * 8


# ---------------------------------------------------------------------------- refused
def test_connection_refused_then_back_fences_and_strikes_nothing() -> None:
    provider = ScriptedProvider(dimensions=DIM, down_for=3)
    result = sweep(corpus(100), provider)
    assert result.counts.embedded == 100
    assert result.fences() == []
    assert result.book.log == []
    assert result.summary.strikes == ()


def test_a_provider_refusing_from_its_first_request_defers_everything_as_unreachable() -> None:
    # Never answered this sweep and refusing past the bounded wait: not there (issue 37).
    provider = ScriptedProvider(dimensions=DIM, always_down=True)
    result = sweep(corpus(100), provider)
    assert result.fences() == []
    assert result.book.log == []
    assert result.counts.deferred == 100
    unreachable = codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE
    assert {r["code"] for r in result.live()} == {unreachable}
    assert {r["details"]["causeCode"] for r in result.live()} == {
        codes.KB_VECTOR_EMBED_CONNECTION_REFUSED
    }
    verdict = classify_sweep_outcome(result.summary.errors)
    assert verdict.outcome == codes.OUTCOME_DEFERRED
    assert verdict.cause_code == unreachable
    # Bounded: the two batches, then at most 33 recovery probes.
    assert result.counts.requests <= 2 + 33


def test_a_provider_that_answered_then_refuses_defers_as_refused_not_unreachable() -> None:
    # It was there this sweep: a passing outage, waited for as before, never "not there".
    provider = ScriptedProvider(dimensions=DIM)
    original = provider.embed

    async def answers_once_then_refuses(texts, cancel_scope, operation_label):  # noqa: ANN001, ANN202
        if provider.completed >= 1:
            provider.always_down = True
        return await original(texts, cancel_scope, operation_label)

    provider.embed = answers_once_then_refuses  # type: ignore[method-assign]
    result = sweep(corpus(100), provider, settings=fast_settings(max_inflight=1, batch_size=10))
    assert result.counts.embedded == 10
    codes_seen = {r["code"] for r in result.live()}
    assert codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE not in codes_seen
    assert codes_seen & {
        codes.KB_VECTOR_EMBED_CONNECTION_REFUSED,
        codes.KB_VECTOR_EMBED_CIRCUIT_OPEN,
    }


def test_a_refused_single_input_is_never_struck() -> None:
    provider = ScriptedProvider(dimensions=DIM, always_down=True)
    result = sweep(corpus(1), provider)
    assert result.book.log == []
    assert result.deferred_ids(codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE) == {cid(0)}


# ---------------------------------------------------------------------------- circuit
def test_consecutive_provider_failures_open_the_circuit() -> None:
    provider = ScriptedProvider(dimensions=DIM)
    provider._behaviour = lambda texts: "unclassified"  # type: ignore[method-assign]
    settings = fast_settings(circuit_threshold=4, max_inflight=1)
    result = sweep(corpus(640), provider, settings=settings)
    assert result.counts.requests == 4
    assert result.book.log == []
    assert result.fences() == []
    codes_seen = {r["code"] for r in result.live()}
    assert codes_seen == {codes.KB_VECTOR_EMBED_CIRCUIT_OPEN}
    assert result.counts.deferred == 640


class NarrowProvider:
    """A provider configured for ``dimensions`` that answers ``answers``-wide vectors
    (a model switched under the same settings), after ``good_first`` right answers."""

    name = "narrow"
    model = "narrow-model"

    def __init__(self, dimensions: int, answers: int, good_first: int = 0) -> None:
        self.dimensions = dimensions
        self.answers = answers
        self.good_first = good_first
        self.calls = 0
        self.requests: list[list[str]] = []
        self.closed = False

    async def embed(self, texts: Any, cancel_scope: CancelScope, operation_label: str) -> Any:
        self.calls += 1
        self.requests.append(list(texts))
        width = self.dimensions if self.calls <= self.good_first else self.answers
        return validate_vectors(
            [hash_embed(t, width) for t in texts], len(texts), self.dimensions, provider=self.name
        )

    async def aclose(self) -> None:
        return None


def test_a_dimension_mismatch_at_first_contact_is_a_configuration_error() -> None:
    provider = NarrowProvider(DIM, 8)
    with pytest.raises(DimensionMismatchError) as info:
        sweep(corpus(10), provider)
    message = str(info.value)
    assert "NEO_EMBEDDING_DIMENSIONS=" + str(DIM) in message
    assert "answers 8-d vectors" in message and "narrow-model" in message
    assert info.value.code == codes.KB_VECTOR_EMBED_DIMENSION_MISMATCH
    assert provider.calls == 1  # first contact: not one deferral after another


def test_a_wrong_width_after_right_ones_stays_a_provider_fault() -> None:
    provider = NarrowProvider(DIM, 8, good_first=1)
    result = sweep(corpus(10), provider, settings=fast_settings(batch_size=5, max_inflight=1))
    assert result.counts.embedded == 5
    assert result.fences() == []
    assert result.deferred_ids(codes.KB_VECTOR_EMBED_INVALID_VECTORS)


def test_invalid_vectors_are_never_written_nor_fenced() -> None:
    provider = ScriptedProvider({"NAN": "nan"}, dimensions=DIM)
    result = sweep(corpus(10, {0: "NAN"}), provider)
    assert cid(0) not in result.store.written
    assert result.deferred_ids(codes.KB_VECTOR_EMBED_INVALID_VECTORS) == {cid(0)}
    assert result.counts.embedded == 9
    assert result.fences() == []


# ---------------------------------------------------------------------------- the store
def test_a_write_error_fences_nothing_and_defers_the_rest_with_the_write_code() -> None:
    store = Store(fail_on_call=2)
    provider = ScriptedProvider(dimensions=DIM, latency_s=0.001)
    result = sweep(corpus(64 * 5), provider, store=store, settings=fast_settings(max_inflight=1))
    assert result.book.log == []
    assert result.fences() == []
    assert result.summary.strikes == ()
    first = result.live()[0]
    assert first["code"] == codes.KB_VECTOR_EMBED_WRITE_ERROR
    assert first["details"]["chunkCount"] == 64  # the batch whose write failed
    assert result.counts.embedded == 64 == len(store.written)
    assert result.counts.deferred == 64 * 4
    assert {r["code"] for r in result.live()} == {codes.KB_VECTOR_EMBED_WRITE_ERROR}
    assert (
        classify_sweep_outcome(result.summary.errors).cause_code
        == codes.KB_VECTOR_EMBED_WRITE_ERROR
    )


# ---------------------------------------------------------------------------- cancellation
def test_an_already_cancelled_scope_opens_zero_requests() -> None:
    scope = CancelScope(label="sweep")
    scope.cancel(codes.ABORT_ERR)
    provider = ScriptedProvider(dimensions=DIM)
    result = sweep(corpus(100), provider, scope=scope)
    assert provider.requests == []
    (row,) = result.live()
    assert row["code"] == codes.KB_VECTOR_EMBED_ABORTED
    assert row["details"]["causeCode"] == codes.ABORT_ERR
    assert row["details"]["chunkCount"] == 100


@pytest.mark.parametrize(
    ("cause", "code"),
    [
        (codes.ABORT_ERR, codes.KB_VECTOR_EMBED_ABORTED),
        (codes.EMBEDDING_PROBE_TIMEOUT, codes.KB_VECTOR_EMBED_TIMEOUT),
        (codes.OPENAI_COMPATIBLE_REQUEST_TIMEOUT, codes.KB_VECTOR_EMBED_TIMEOUT),
    ],
)
def test_cancelling_in_flight_stops_at_once_with_zero_further_requests(
    cause: str, code: str
) -> None:
    provider = ScriptedProvider({"SLOW": "hang"}, dimensions=DIM)
    items = corpus(64 * 6, {0: "SLOW", 64: "SLOW"})
    counts_at_cancel: list[int] = []

    async def cancel_when_both_in_flight(scope: CancelScope, p: ScriptedProvider) -> None:
        while len(p.requests) < 2:
            await asyncio.sleep(0.001)
        counts_at_cancel.append(len(p.requests))
        scope.cancel(cause)

    result = sweep(
        items, provider, settings=fast_settings(max_inflight=2), during=cancel_when_both_in_flight
    )
    assert len(provider.requests) == counts_at_cancel[0] == 2
    assert provider.cancelled == 2  # both in-flight requests were cancelled
    assert result.counts.embedded == 0
    (row,) = result.live()
    assert row["code"] == code
    assert row["details"]["causeCode"] == cause
    assert result.book.log == []


def test_cancelling_during_recovery_backoff_ends_the_delay_at_once() -> None:
    settings = fast_settings(
        recovery_initial_s=3600.0,
        recovery_max_s=3600.0,
        recovery_max_wait_s=36000.0,
        unreachable_wait_s=36000.0,
    )
    provider = ScriptedProvider(dimensions=DIM, always_down=True)

    async def cancel_after_probe(scope: CancelScope, p: ScriptedProvider) -> None:
        while len(p.requests) < 2:  # the refused batch, then the first probe
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.01)
        scope.cancel(codes.ABORT_ERR)

    result = sweep(corpus(10), provider, settings=settings, during=cancel_after_probe)
    assert len(provider.requests) == 2
    assert {r["code"] for r in result.live()} == {codes.KB_VECTOR_EMBED_ABORTED}
    assert result.book.log == []


def test_batches_already_embedded_are_still_written_after_cancellation() -> None:
    provider = ScriptedProvider({"SLOW": "hang"}, dimensions=DIM)
    items = corpus(64 * 3, {130: "SLOW"})

    async def cancel_on_hang(scope: CancelScope, p: ScriptedProvider) -> None:
        while len(p.requests) < 3:
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.01)
        scope.cancel(codes.ABORT_ERR)

    result = sweep(items, provider, settings=fast_settings(max_inflight=1), during=cancel_on_hang)
    assert result.counts.embedded == 128
    assert result.counts.deferred == 64


# ---------------------------------------------------------------------------- the book
def test_in_memory_fence_book_keeps_generations_apart() -> None:
    book = InMemoryFenceBook()
    book.record_fence(
        "g1",
        FenceRecord(
            cid(1),
            codes.DISPOSITION_PROVEN_CONTENT_POISON,
            codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON,
            {"a": 1},
            5.0,
        ),
    )
    book.record_strike("g1", StrikeRecord(cid(2), "death", 1, {}))
    assert book.fenced_ids("g1") == {cid(1)}
    assert book.fenced_ids("g2") == set()
    assert book.strike_records("g2") == {}
    assert book.strike_records("g1")[cid(2)] == StrikeRecord(cid(2), "death", 1, {})
    assert book.fence_records("g1")[cid(1)].observed_at == 5.0


def test_nothing_to_embed_costs_nothing() -> None:
    provider = ScriptedProvider(dimensions=DIM)
    result = sweep([], provider)
    assert provider.requests == []
    assert result.summary.errors == ()
    assert classify_sweep_outcome(result.summary.errors).outcome == codes.OUTCOME_COMPLETE


def test_a_stored_fence_with_an_unknown_disposition_is_not_a_fence() -> None:
    book = InMemoryFenceBook()
    book.record_fence(GEN, FenceRecord(cid(0), "maybe-bad", "SOMETHING", {}, 1.0))
    provider = ScriptedProvider(dimensions=DIM)
    result = sweep(corpus(2), provider, book=book)
    assert result.counts.already_fenced == 0
    assert result.counts.embedded == 2
