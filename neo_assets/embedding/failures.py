"""The embedding failure taxonomy at the transport: every failure becomes ONE closed code,
the outermost definite classification in the exception chain winning.
Design: docs/design/embedding.md#failures"""

import asyncio
import errno
import http.client
import re

import httpx

from neo_assets.core import codes
from neo_assets.embedding.cancel import Cancelled
from neo_assets.embedding.rules.lane_evidence import batch_cap_from_message as batch_cap_of

# errnos that mean "no one accepted the connection".
_NOT_LISTENING_ERRNOS = frozenset({errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH})
# errnos that mean "an accepted connection was dropped".
_CLOSED_ERRNOS = frozenset({errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED, errno.ESHUTDOWN})

# A refusal whose message says the input is over the provider's limit: a size refusal
# (KB_VECTOR_EMBED_INPUT_TOO_LARGE), whatever its status. The wordings of the servers
# this project meets: llama.cpp "input (N tokens) is too large to process. increase the
# physical batch size" (500), Ollama "input length exceeds the context length", TEI 413
# and "must have less than N tokens" (413/422), vLLM and OpenAI "maximum context length
# is N tokens" (400).
_TOO_LARGE = re.compile(
    r"too large|too long|exceeds? (the )?(maximum )?context|context (length|size|window)"
    r"|maximum (input|sequence|context)|physical batch size|input length"
    r"|must have less than \d+ tokens",
    re.IGNORECASE,
)
# A 5xx (503 mostly) whose message says the model is not loaded yet: llama.cpp "Loading
# model", Ollama "model is loading" / "server busy, please try again" while it swaps
# models in, vLLM/TEI "not ready" while starting.
_LOADING = re.compile(
    r"loading model|model (is )?(still )?(being )?load|is (currently |still )?loading"
    r"|not (yet )?ready|starting up|warming up",
    re.IGNORECASE,
)
# A 5xx whose message says the process computing the embeddings died (Ollama "llama
# runner process has terminated: signal: killed", "llama runner process no longer
# running", llama.cpp crash pages): the same evidence as an accepted connection dropped.
_DIED = re.compile(
    r"runner process (has )?(terminated|no longer running|exited)|process (has )?"
    r"(terminated|died|crashed)|signal: (killed|aborted|segmentation)|segmentation fault"
    r"|core dumped|out of memory|oom.?kill",
    re.IGNORECASE,
)
# A cap on the number of inputs per request is about the batch, not any one input
# (TEI "batch size 64 > maximum allowed batch size 32"): not a size refusal.
_BATCH_CAP = re.compile(r"maximum allowed batch size|batch size \d+ >", re.IGNORECASE)
# The limit a size refusal names, where it names one.
_LIMIT_IN_MESSAGE = (
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),
    re.compile(r"less than (\d+) tokens", re.IGNORECASE),
    re.compile(r"context (?:length|size|window) (?:of |is )?\(?(\d+)", re.IGNORECASE),
    re.compile(r"limit of (\d+)", re.IGNORECASE),
    # llama.cpp: an input must fit its physical batch (``-ub``), which may be under n_ctx.
    re.compile(r"current batch size: (\d+)", re.IGNORECASE),
)
_INPUT_TOKENS_IN_MESSAGE = (
    re.compile(r"input \((\d+) tokens\)", re.IGNORECASE),
    re.compile(r"requested (\d+) tokens", re.IGNORECASE),
    re.compile(r"Given: (\d+)", re.IGNORECASE),
    re.compile(r"(\d+) tokens over", re.IGNORECASE),
)
# httpx/h11 wording for "the peer closed an accepted connection".
_DISCONNECTED = re.compile(
    r"disconnected|peer closed|incomplete|connection (was )?(reset|closed|aborted)",
    re.IGNORECASE,
)

_MAX_DETAIL = 300
_MAX_LABEL = 120


def bounded(text: str, limit: int = _MAX_DETAIL) -> str:
    """A diagnostic string cut to a fixed size (receipts stay small and carry no bulk text)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class EmbedFailure(Exception):
    """A provider call that failed, already classified. ``provider_code`` keeps which deadline
    fired (or ``ABORT_ERR``), which the class alone would blur; ``detail`` is bounded and
    never carries input text."""

    def __init__(
        self,
        code: str,
        *,
        provider_code: str | None = None,
        status: int | None = None,
        operation_label: str = "",
        detail: str = "",
        provider: str | None = None,
        timeout_ms: int | None = None,
        limit_tokens: int | None = None,
    ) -> None:
        if code not in codes.EMBED_FAILURE_CODES:
            raise ValueError(f"not an embedding failure code: {code!r}")
        self.code = code
        self.provider_code = provider_code
        self.status = status
        self.operation_label = bounded(operation_label, _MAX_LABEL)
        self.detail = bounded(detail)
        self.provider = provider
        self.timeout_ms = timeout_ms
        # A size refusal's limit, when the provider named it (else the band in force).
        self.limit_tokens = limit_tokens if limit_tokens is not None else size_limit(detail)
        named = {
            "cause": provider_code,
            "status": status,
            "provider": provider,
            "op": self.operation_label,
            "timeoutMs": timeout_ms,
        }
        said = [f"{key}={value}" for key, value in named.items() if value not in (None, "")]
        super().__init__(" ".join([code, *said, *([self.detail] if self.detail else [])]))


def is_size_message(message: str) -> bool:
    """True when a provider's error text says an input is over its limit (not a cap on
    the number of inputs per request)."""
    text = message or ""
    return bool(_TOO_LARGE.search(text)) and not _BATCH_CAP.search(text)


def size_limit(message: str) -> int | None:
    """The token limit a size refusal's text names, if it names one."""
    for pattern in _LIMIT_IN_MESSAGE:
        found = pattern.search(message or "")
        if found:
            return int(found.group(1))
    return None


def size_tokens(message: str) -> int | None:
    """The input's token count a size refusal's text names, if it names one."""
    for pattern in _INPUT_TOKENS_IN_MESSAGE:
        found = pattern.search(message or "")
        if found:
            return int(found.group(1))
    return None


def classify_http_status(status: int, message: str = "") -> str:
    """One HTTP error answer → its class (``message``: the provider's error text). A batch-size
    cap is about the request's shape, never an input; "too large" is a size refusal whatever
    the status (llama.cpp answers it with 500)."""
    text = message or ""
    if status in (408, 504):
        return codes.KB_VECTOR_EMBED_TIMEOUT
    if status in (400, 413, 422) and batch_cap_of(text) is not None:
        return codes.KB_VECTOR_EMBED_BATCH_CAP
    if status >= 400 and status not in (401, 403, 404, 429) and is_size_message(text):
        return codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE
    if status == 413 and not _BATCH_CAP.search(text):
        return codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE
    if 400 <= status < 500:
        return codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL
    if status >= 500 and _LOADING.search(text):
        return codes.KB_VECTOR_EMBED_PROVIDER_LOADING
    if status >= 500 and _DIED.search(text):
        return codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
    return codes.KB_VECTOR_EMBED_UNCLASSIFIED


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and everything behind it, outermost first, each once (cycles are possible):
    also a ``__context__`` suppressed by ``from None`` and exceptions passed as arguments,
    where httpcore keeps the errno."""
    seen: set[int] = set()
    out: list[BaseException] = []
    stack: list[BaseException] = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        out.append(current)
        behind: list[BaseException] = []
        if current.__cause__ is not None:
            behind.append(current.__cause__)
        if current.__context__ is not None:
            behind.append(current.__context__)
        if isinstance(current, BaseExceptionGroup):
            behind.extend(current.exceptions)
        behind.extend(a for a in current.args if isinstance(a, BaseException))
        stack.extend(reversed(behind))
    return out


def _errnos(exc: BaseException) -> set[int]:
    return {e.errno for e in _chain(exc) if isinstance(e, OSError) and e.errno is not None}


def _classify_cancel_cause(cause: str) -> str:
    if cause in codes.DEADLINE_CAUSE_CODES:  # a provider's own deadline, or a probe's
        return codes.KB_VECTOR_EMBED_TIMEOUT
    if cause in codes.EMBED_FAILURE_CODES:
        # A scope cancelled with a class of its own (e.g. the lane's circuit or yield).
        return cause
    return codes.KB_VECTOR_EMBED_ABORTED


def _classify_one(exc: BaseException) -> str:
    """The class ``exc`` alone proves, or UNCLASSIFIED when it proves nothing specific."""
    unclassified = codes.KB_VECTOR_EMBED_UNCLASSIFIED
    if isinstance(exc, EmbedFailure):
        return exc.code
    if isinstance(exc, Cancelled):
        return _classify_cancel_cause(exc.cause)
    if isinstance(exc, asyncio.CancelledError):
        # The awaiting task itself was cancelled from outside: an upstream abort.
        return codes.KB_VECTOR_EMBED_ABORTED
    if isinstance(exc, httpx.ConnectError):
        # Refused only when the OS says nobody listened; a TLS or DNS failure says other.
        if _errnos(exc) & _NOT_LISTENING_ERRNOS or any(
            isinstance(e, ConnectionRefusedError) for e in _chain(exc)
        ):
            return codes.KB_VECTOR_EMBED_CONNECTION_REFUSED
        return unclassified
    if isinstance(exc, httpx.TimeoutException):
        return codes.KB_VECTOR_EMBED_TIMEOUT
    if isinstance(exc, httpx.ReadError | httpx.WriteError):
        return codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
    if isinstance(exc, httpx.RemoteProtocolError):
        if _DISCONNECTED.search(str(exc)):
            return codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
        return unclassified
    if isinstance(exc, httpx.HTTPStatusError):
        return classify_http_status(exc.response.status_code, _safe_text(exc.response))
    if isinstance(exc, ConnectionRefusedError):
        return codes.KB_VECTOR_EMBED_CONNECTION_REFUSED
    if isinstance(exc, ConnectionResetError | BrokenPipeError | ConnectionAbortedError):
        return codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
    if isinstance(exc, http.client.IncompleteRead | http.client.RemoteDisconnected):
        return codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
    if isinstance(exc, TimeoutError):
        return codes.KB_VECTOR_EMBED_TIMEOUT
    if isinstance(exc, OSError) and exc.errno is not None:
        if exc.errno in _CLOSED_ERRNOS:
            return codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
        if exc.errno in _NOT_LISTENING_ERRNOS:
            return codes.KB_VECTOR_EMBED_CONNECTION_REFUSED
    return unclassified


def _safe_text(response: httpx.Response) -> str:
    try:
        return response.text
    except (httpx.ResponseNotRead, UnicodeDecodeError):
        return ""


def classify_failure(exc: BaseException) -> str:
    """The ONE closed ``KB_VECTOR_EMBED_*`` code for ``exc`` and its causes; UNCLASSIFIED when
    nothing in the chain is recognised."""
    for link in _chain(exc):
        code = _classify_one(link)
        if code != codes.KB_VECTOR_EMBED_UNCLASSIFIED:
            return code
    return codes.KB_VECTOR_EMBED_UNCLASSIFIED


def failure_cause(exc: BaseException) -> str | None:
    """The cause code behind a class (which deadline fired, or ABORT_ERR), if any: what keeps an
    upstream abort, a provider's deadline and a probe's deadline apart."""
    for link in _chain(exc):
        if isinstance(link, EmbedFailure) and link.provider_code:
            return link.provider_code
        if isinstance(link, Cancelled):
            return link.cause
    return None


def as_embed_failure(
    exc: BaseException, *, operation_label: str = "", provider: str | None = None
) -> EmbedFailure:
    """``exc`` itself when it already is an EmbedFailure, else a classified one wrapping it.

    The result's ``__cause__`` is ``exc`` so the evidence chain survives.
    """
    if isinstance(exc, EmbedFailure):
        return exc
    status: int | None = None
    for link in _chain(exc):
        if isinstance(link, EmbedFailure) and link.status is not None:
            status = link.status
            break
        if isinstance(link, httpx.HTTPStatusError):
            status = link.response.status_code
            break
    label = operation_label
    if not label and isinstance(exc, Cancelled):
        label = exc.operation_label
    failure = EmbedFailure(
        classify_failure(exc),
        provider_code=failure_cause(exc),
        status=status,
        operation_label=label,
        detail=f"{type(exc).__name__}: {exc}",
        provider=provider,
    )
    failure.__cause__ = exc
    return failure


def is_connect_failure(exc: BaseException) -> bool:
    """Whether a connection was never made (anywhere in ``exc``'s chain)."""
    return any(isinstance(e, httpx.ConnectError | ConnectionRefusedError) for e in _chain(exc))
