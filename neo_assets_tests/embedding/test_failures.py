"""classify_failure: every failure chain lands in exactly one closed KB_VECTOR_EMBED_* code.

Transport errors here are real where they can be made cheaply (a connect to a port
nothing listens on); the rest are the exception chains httpx and the stdlib produce.
Provider-level faults against a real server are in test_providers.py.
"""

import asyncio
import errno
import http.client
import ssl

import httpx
import pytest

from neo_assets.core import codes
from neo_assets.embedding.cancel import Cancelled, CancelScope
from neo_assets.embedding.failures import (
    EmbedFailure,
    as_embed_failure,
    classify_failure,
    classify_http_status,
    failure_cause,
    size_limit,
    size_tokens,
)
from neo_assets.embedding.rules.provider_kinds import timeout_code
from neo_assets_tests.fakes.supervisor import free_port


def _raised(exc: BaseException, cause: BaseException | None = None) -> BaseException:
    """``exc`` as it looks after ``raise exc from cause`` (traceback and chain set)."""
    try:
        if cause is None:
            raise exc
        raise exc from cause
    except BaseException as caught:  # noqa: BLE001 - returning it is the point
        return caught


def _status_error(status: int, body: str = "") -> httpx.HTTPStatusError:
    request = httpx.Request("POST", "http://127.0.0.1/v1/embeddings")
    response = httpx.Response(status, text=body, request=request)
    return httpx.HTTPStatusError("status", request=request, response=response)


# --- cancellation causes
@pytest.mark.parametrize(
    ("cause", "code"),
    [
        (codes.ABORT_ERR, codes.KB_VECTOR_EMBED_ABORTED),
        (codes.OPENAI_COMPATIBLE_REQUEST_TIMEOUT, codes.KB_VECTOR_EMBED_TIMEOUT),
        (codes.PROVIDER_TIMEOUT, codes.KB_VECTOR_EMBED_TIMEOUT),
        (codes.OLLAMA_REQUEST_TIMEOUT, codes.KB_VECTOR_EMBED_TIMEOUT),
        (codes.GEMINI_REQUEST_TIMEOUT, codes.KB_VECTOR_EMBED_TIMEOUT),
        (codes.EMBEDDING_PROBE_TIMEOUT, codes.KB_VECTOR_EMBED_TIMEOUT),
        (codes.KB_VECTOR_EMBED_CIRCUIT_OPEN, codes.KB_VECTOR_EMBED_CIRCUIT_OPEN),
        (codes.KB_VECTOR_EMBED_YIELD, codes.KB_VECTOR_EMBED_YIELD),
        ("SOMEONE_ELSES_REASON", codes.KB_VECTOR_EMBED_ABORTED),
    ],
)
def test_cancelled_classifies_by_its_cause(cause: str, code: str) -> None:
    scope = CancelScope(label="probe")
    scope.cancel(cause)
    with pytest.raises(Cancelled) as info:
        scope.raise_if_cancelled()
    assert classify_failure(info.value) == code
    assert failure_cause(info.value) == cause


def test_three_causes_stay_distinct_after_conversion() -> None:
    failures = [
        as_embed_failure(Cancelled(cause, "op"))
        for cause in (
            codes.ABORT_ERR,
            codes.OPENAI_COMPATIBLE_REQUEST_TIMEOUT,
            codes.EMBEDDING_PROBE_TIMEOUT,
        )
    ]
    assert [f.code for f in failures] == [
        codes.KB_VECTOR_EMBED_ABORTED,
        codes.KB_VECTOR_EMBED_TIMEOUT,
        codes.KB_VECTOR_EMBED_TIMEOUT,
    ]
    assert [f.provider_code for f in failures] == [
        codes.ABORT_ERR,
        codes.OPENAI_COMPATIBLE_REQUEST_TIMEOUT,
        codes.EMBEDDING_PROBE_TIMEOUT,
    ]
    assert all(f.operation_label == "op" for f in failures)
    assert all(isinstance(f.__cause__, Cancelled) for f in failures)


def test_task_cancellation_is_an_abort() -> None:
    assert classify_failure(asyncio.CancelledError()) == codes.KB_VECTOR_EMBED_ABORTED


# --- connection refused: nothing was listening
def test_real_connect_to_a_closed_port_is_connection_refused() -> None:
    port = free_port()

    async def attempt() -> BaseException:
        async with httpx.AsyncClient() as client:
            try:
                await client.post(f"http://127.0.0.1:{port}/v1/embeddings", json={})
            except httpx.HTTPError as exc:
                return exc
        raise AssertionError("a closed port answered")

    exc = asyncio.run(attempt())
    assert isinstance(exc, httpx.ConnectError)
    assert classify_failure(exc) == codes.KB_VECTOR_EMBED_CONNECTION_REFUSED


def test_connect_error_from_an_exception_group_of_refusals() -> None:
    group = ExceptionGroup(
        "attempts",
        [ConnectionRefusedError(errno.ECONNREFUSED, "v4"), ConnectionRefusedError(111, "v6")],
    )
    inner = _raised(OSError("All connection attempts failed"), group)
    exc = _raised(httpx.ConnectError("All connection attempts failed"), inner)
    assert classify_failure(exc) == codes.KB_VECTOR_EMBED_CONNECTION_REFUSED


def test_connect_error_without_a_refusal_is_not_called_refused() -> None:
    tls = _raised(httpx.ConnectError("handshake"), ssl.SSLError("bad cert"))
    assert classify_failure(tls) == codes.KB_VECTOR_EMBED_UNCLASSIFIED


def test_bare_connection_refused_error() -> None:
    exc = ConnectionRefusedError(errno.ECONNREFUSED, "refused")
    assert classify_failure(exc) == codes.KB_VECTOR_EMBED_CONNECTION_REFUSED


# --- transport closed: the provider had accepted the connection
@pytest.mark.parametrize(
    "exc",
    [
        _raised(httpx.ReadError(""), ConnectionResetError(errno.ECONNRESET, "reset")),
        _raised(httpx.RemoteProtocolError("Server disconnected without sending a response.")),
        _raised(httpx.RemoteProtocolError("peer closed connection without sending complete body")),
        _raised(httpx.WriteError("write"), BrokenPipeError(errno.EPIPE, "pipe")),
        ConnectionResetError(errno.ECONNRESET, "reset"),
        BrokenPipeError(errno.EPIPE, "pipe"),
        http.client.IncompleteRead(b"partial", 10),
        http.client.RemoteDisconnected("closed"),
        OSError(errno.ECONNRESET, "reset by peer"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_transport_closed(exc: BaseException) -> None:
    assert classify_failure(exc) == codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED


def test_other_protocol_errors_prove_nothing() -> None:
    exc = httpx.RemoteProtocolError("illegal header line")
    assert classify_failure(exc) == codes.KB_VECTOR_EMBED_UNCLASSIFIED


# --- timeouts
@pytest.mark.parametrize(
    "exc",
    [
        httpx.ReadTimeout("read"),
        httpx.ConnectTimeout("connect"),
        httpx.WriteTimeout("write"),
        httpx.PoolTimeout("pool"),
        TimeoutError(),
    ],
    ids=lambda e: type(e).__name__,
)
def test_timeouts(exc: BaseException) -> None:
    assert classify_failure(exc) == codes.KB_VECTOR_EMBED_TIMEOUT


# --- HTTP answers
@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (400, '{"error": {"message": "invalid input"}}', codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL),
        (401, "unauthorized", codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL),
        (404, "no model", codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL),
        (413, "payload too large", codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE),
        (413, "", codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE),
        (422, "must have less than 512 tokens", codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE),
        (
            413,
            "Input validation error: `inputs` must have less than 512 tokens. Given: 600",
            codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE,
        ),
        (
            400,
            "This model's maximum context length is 512 tokens. However, you requested "
            "600 tokens (600 in the messages). Please reduce the length of the messages.",
            codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE,
        ),
        # A cap on inputs per request is about the batch, not an input's size: the lane
        # learns it and shrinks its batches.
        (
            413,
            "batch size 64 > maximum allowed batch size 32",
            codes.KB_VECTOR_EMBED_BATCH_CAP,
        ),
        (429, "input too large? no: slow down", codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL),
        (429, "slow down", codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL),
        (408, "", codes.KB_VECTOR_EMBED_TIMEOUT),
        (504, "gateway timeout", codes.KB_VECTOR_EMBED_TIMEOUT),
        (
            500,
            '{"error": {"code": 500, "message": "input is too large to process. '
            'increase the physical batch size", "type": "server_error"}}',
            codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE,
        ),
        (
            500,
            "input (612 tokens) is too large to process. increase the physical batch size "
            "(current batch size: 512)",
            codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE,
        ),
        (
            500,
            "the input length exceeds the context length",
            codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE,
        ),
        (
            400,
            '{"error":"the input length exceeds the context length"}',
            codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE,
        ),
        (500, '{"error": "internal error"}', codes.KB_VECTOR_EMBED_UNCLASSIFIED),
        (503, '{"error": {"message": "Loading model"}}', codes.KB_VECTOR_EMBED_PROVIDER_LOADING),
        (503, '{"error": "model is loading"}', codes.KB_VECTOR_EMBED_PROVIDER_LOADING),
        (503, '{"error": "server not ready"}', codes.KB_VECTOR_EMBED_PROVIDER_LOADING),
        (503, '{"error": "service unavailable"}', codes.KB_VECTOR_EMBED_UNCLASSIFIED),
        (
            500,
            '{"error": "llama runner process has terminated: signal: killed"}',
            codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED,
        ),
        (
            500,
            '{"error": "llama runner process no longer running: -1"}',
            codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED,
        ),
        (
            413,
            '{"error": "batch size 64 > maximum allowed batch size 32", '
            '"error_type": "Validation"}',
            codes.KB_VECTOR_EMBED_BATCH_CAP,
        ),
        (
            422,
            '{"error": "batch size 64 > maximum allowed batch size 32"}',
            codes.KB_VECTOR_EMBED_BATCH_CAP,
        ),
    ],
)
def test_http_status(status: int, body: str, code: str) -> None:
    assert classify_http_status(status, body) == code
    assert classify_failure(_status_error(status, body)) == code


@pytest.mark.parametrize(
    ("message", "limit", "tokens"),
    [
        (
            "This model's maximum context length is 512 tokens. However, you requested 600 tokens",
            512,
            600,
        ),
        ("Input validation error: `inputs` must have less than 256 tokens. Given: 300", 256, 300),
        ("input (612 tokens) is too large to process. increase the physical batch size", None, 612),
        ("input 1 is too large: 300 tokens over the model's limit of 256", 256, 300),
        ("the input length exceeds the context length", None, None),
    ],
)
def test_a_size_refusal_names_its_limit_where_the_provider_does(
    message: str, limit: int | None, tokens: int | None
) -> None:
    assert size_limit(message) == limit
    assert size_tokens(message) == tokens
    assert EmbedFailure(codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE, detail=message).limit_tokens == limit


def test_status_survives_conversion() -> None:
    failure = as_embed_failure(_status_error(400, "nope"), operation_label="batch-1")
    assert failure.code == codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL
    assert failure.status == 400
    assert failure.operation_label == "batch-1"


# --- precedence along the chain
def test_explicit_classification_above_the_transport_wins() -> None:
    # A store write that failed on a reset socket is a write failure, not a provider death.
    reset = ConnectionResetError(errno.ECONNRESET, "reset")
    write = _raised(EmbedFailure(codes.KB_VECTOR_EMBED_WRITE_ERROR, detail="chroma"), reset)
    assert classify_failure(write) == codes.KB_VECTOR_EMBED_WRITE_ERROR


def test_an_unclassified_wrapper_defers_to_the_transport_beneath() -> None:
    reset = _raised(httpx.ReadError(""), ConnectionResetError(errno.ECONNRESET, "reset"))
    wrapper = _raised(EmbedFailure(codes.KB_VECTOR_EMBED_UNCLASSIFIED), reset)
    assert classify_failure(wrapper) == codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
    assert classify_failure(_raised(RuntimeError("wrapped"), reset)) == (
        codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
    )


def test_context_is_followed_even_when_suppressed() -> None:
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "refused")
    try:
        try:
            raise refused
        except OSError:
            raise httpx.ConnectError("connect failed") from None
    except httpx.ConnectError as exc:
        assert exc.__suppress_context__
        assert classify_failure(exc) == codes.KB_VECTOR_EMBED_CONNECTION_REFUSED


def test_unknown_errors_are_unclassified() -> None:
    assert classify_failure(ValueError("bug")) == codes.KB_VECTOR_EMBED_UNCLASSIFIED
    assert failure_cause(ValueError("bug")) is None


def test_cyclic_chains_terminate() -> None:
    a, b = ValueError("a"), KeyError("b")
    a.__context__, b.__context__ = b, a
    assert classify_failure(a) == codes.KB_VECTOR_EMBED_UNCLASSIFIED


# --- the failure object
def test_embed_failure_only_takes_closed_codes() -> None:
    with pytest.raises(ValueError):
        EmbedFailure("KB_SOMETHING_NEW")


def test_embed_failure_bounds_its_strings() -> None:
    failure = EmbedFailure(
        codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL, operation_label="x" * 500, detail="y" * 5000
    )
    assert len(failure.operation_label) <= 120
    assert len(failure.detail) <= 300
    assert str(failure).startswith(codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL)


def test_as_embed_failure_returns_an_embed_failure_unchanged() -> None:
    failure = EmbedFailure(codes.KB_VECTOR_EMBED_INVALID_VECTORS)
    assert as_embed_failure(failure) is failure


def test_provider_timeout_codes() -> None:
    assert timeout_code("openai_compatible") == codes.OPENAI_COMPATIBLE_REQUEST_TIMEOUT
    assert timeout_code("ollama") == codes.PROVIDER_TIMEOUT
    assert timeout_code("gemini") == codes.GEMINI_REQUEST_TIMEOUT
    assert timeout_code("anything-else") == codes.PROVIDER_TIMEOUT
