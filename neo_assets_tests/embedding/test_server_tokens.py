"""The server's own token count for the split (``embedding/server_tokens.py``), against
small HTTP servers on loopback that answer in the shapes of vLLM and TEI (which cannot run
here) and that start late, load, or have no tokenize endpoint. llama.cpp's two servers are
real in ``sweep/test_server_tokenizer_sweep.py``."""

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from neo_assets.core import codes
from neo_assets.embedding.rules.band import ADDED_TOKENS
from neo_assets.embedding.server_tokens import (
    CountUnavailable,
    NoTokenizeEndpoint,
    ServerTokenCounter,
)
from neo_assets_tests.servers import free_port

Handler = Callable[[str, dict[str, Any]], tuple[int, Any]]


def words(text: str) -> int:
    return len(text.split())


def vllm(path: str, body: dict[str, Any]) -> tuple[int, Any]:
    if path == "/tokenize" and "prompt" in body:
        return 200, {"count": words(body["prompt"]) + 2, "tokens": [], "max_model_len": 512}
    return 400, {"error": "prompt is required"}


def tei(path: str, body: dict[str, Any]) -> tuple[int, Any]:
    if path == "/tokenize" and "inputs" in body:
        return 200, [[{"id": i} for i in range(words(body["inputs"]) + 2)]]
    return 422, {"error": "missing field inputs"}


def nothing(path: str, body: dict[str, Any]) -> tuple[int, Any]:
    return 404, {"error": "not found"}


@contextmanager
def serving(handler: Handler, port: int | None = None) -> Iterator[tuple[str, list[str]]]:
    seen: list[str] = []

    class Http(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(self.path)
            status, answer = handler(self.path, json.loads(raw or b"{}"))
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port or free_port()), Http)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


LONG = "alpha beta gamma delta " * 40  # 160 words, 920 bytes: over a 64-token band


def counter(url: str, band: int = 64, **kw: Any) -> ServerTokenCounter:
    return ServerTokenCounter(url, model="m", band_tokens=band, timeout_s=5.0, **kw)


@pytest.mark.parametrize("handler", [vllm, tei], ids=["vllm", "tei"])
def test_vllm_and_tei_shapes_are_found_and_counted(handler: Handler) -> None:
    with serving(handler) as (url, _):
        count = counter(url)
        assert count([LONG]) == [words(LONG) + 2]
        assert count.endpoint is not None and count.endpoint.name == handler.__name__


def test_a_text_that_cannot_be_over_the_band_is_not_asked_and_counts_are_cached() -> None:
    with serving(vllm) as (url, seen):
        count = counter(url)
        short = "tiny"
        # At most one token per byte, plus the added ones: within 64 without asking.
        assert count([short]) == [len(short) + ADDED_TOKENS]
        assert seen == []
        count([LONG, LONG])
        count([LONG])
        assert count.asked == 1


def test_a_server_with_no_tokenize_endpoint_is_a_config_error_naming_the_setting() -> None:
    with serving(nothing) as (url, _):
        with pytest.raises(NoTokenizeEndpoint) as raised:
            counter(url)([LONG])
    message = str(raised.value)
    assert "NEO_EMBEDDING_TOKENIZER=estimate" in message and url in message
    assert raised.value.code == codes.KB_VECTOR_EMBED_NO_TOKENIZE_ENDPOINT


def test_a_server_that_never_comes_up_defers_within_the_wait() -> None:
    slept: list[float] = []
    count = counter(f"http://127.0.0.1:{free_port()}", wait_s=2.0, sleep=slept.append)
    with pytest.raises(CountUnavailable) as raised:
        count([LONG])
    assert raised.value.code == codes.KB_VECTOR_EMBED_CONNECTION_REFUSED
    assert "NEO_EMBEDDING_TOKENIZER=server" in str(raised.value)
    assert 0 < sum(slept) <= 2.0


def test_a_loading_server_is_waited_for_then_counted() -> None:
    answers = iter([(503, {"error": "Loading model"})] * 3)

    def loading(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        return next(answers, None) or vllm(path, body)

    slept: list[float] = []
    with serving(loading) as (url, _):
        assert counter(url, sleep=slept.append)([LONG]) == [words(LONG) + 2]
    assert len(slept) == 3


def test_a_server_still_loading_past_the_wait_defers_with_the_loading_code() -> None:
    with serving(lambda path, body: (503, {"error": "Loading model"})) as (url, _):
        with pytest.raises(CountUnavailable) as raised:
            counter(url, wait_s=1.0, sleep=lambda s: None)([LONG])
    assert raised.value.code == codes.KB_VECTOR_EMBED_PROVIDER_LOADING
