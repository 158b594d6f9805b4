"""Each provider kind's limit, discovered at first contact (``embedding/discovery.py``):
recorded in the ledger, read back by every digest without the network, and a changed
limit (a server restarted with another context) moves the generation.

TEI, vLLM and Ollama cannot run here: a small HTTP server answers their documented
endpoints (``/info``, ``/v1/models``, ``/api/show``) with a limit the test changes; the
llama.cpp servers' own answers are here too (their real runs:
``test_discovered_limits_real.py``)."""

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from neo_assets.config.settings import load_settings
from neo_assets.embedding.band import band_for
from neo_assets.embedding.discovery import discover_and_record
from neo_assets.embedding.rules.band import SOURCE_DISCOVERED, SOURCE_SERVER, SOURCE_TOKENIZER
from neo_assets.generations.serving import configured_generation
from neo_assets.services.handles import open_ledger
from neo_assets.store.provider_limits import recorded_discovery
from neo_assets_tests.servers import LOOPBACK, free_port


class FakeServer:
    """One embedding server's discovery endpoints, for ``flavour``, with ``limit``."""

    def __init__(self, flavour: str, limit: int, port: int) -> None:
        self.flavour, self.limit, self.port = flavour, limit, port
        self.requests: list[str] = []

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def answer(self, method: str, path: str, body: Any) -> Any:
        f, limit = self.flavour, self.limit
        if f == "llama.cpp" and (method, path) == ("GET", "/props"):
            return {"default_generation_settings": {"n_ctx": limit}, "total_slots": 1}
        if f == "tei" and (method, path) == ("GET", "/info"):
            return {"model_id": "m", "max_input_length": limit}
        if f == "vllm" and (method, path) == ("GET", "/v1/models"):
            return {
                "data": [{"id": "other", "max_model_len": 99}, {"id": "m", "max_model_len": limit}]
            }
        if f == "llama-cpp-python" and path == "/extras/tokenize/count":
            return {"count": len(str(body.get("input", "")).split())}
        if f == "llama-cpp-python" and path == "/v1/embeddings":
            count = len(str(body["input"][0]).split())
            return {"data": [], "usage": {"prompt_tokens": min(count, limit)}}
        if f == "ollama" and path == "/api/show" and body.get("model") == "m":
            return {"model_info": {"general.architecture": "bert", "bert.context_length": limit}}
        return None

    @contextmanager
    def running(self) -> Iterator["FakeServer"]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, method: str) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}") if size else {}
                fake.requests.append(f"{method} {self.path}")
                answer = fake.answer(method, self.path, body)
                data = json.dumps(answer if answer is not None else {"error": "no"}).encode()
                self.send_response(200 if answer is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                self._reply("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._reply("POST")

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer((LOOPBACK, self.port), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()


# flavour -> (provider kind, the tokenizer recorded, the band's source)
FLAVOURS = {
    "llama.cpp": ("openai_compatible", "llama.cpp", SOURCE_SERVER),
    "tei": ("openai_compatible", "tei", SOURCE_SERVER),
    "vllm": ("openai_compatible", "vllm", SOURCE_SERVER),
    "llama-cpp-python": ("openai_compatible", "llama-cpp-python", SOURCE_SERVER),
    "ollama": ("ollama", None, SOURCE_DISCOVERED),
}


def _configure(monkeypatch: pytest.MonkeyPatch, kind: str, base_url: str) -> None:
    monkeypatch.setenv("NEO_EMBEDDING_PROVIDER", kind)
    monkeypatch.setenv("NEO_EMBEDDING_BASE_URL", base_url)
    monkeypatch.setenv("NEO_EMBEDDING_MODEL", "m")


def _contact() -> tuple[Any, bool]:
    settings = load_settings()
    with open_ledger(settings) as ledger:
        return discover_and_record(settings, ledger, now=1.0)


def _recorded() -> tuple[int | None, str | None] | None:
    settings = load_settings()
    e = settings.embedding
    with open_ledger(settings) as ledger:
        found = recorded_discovery(ledger, e.provider, e.base_url, e.model)
    return None if found is None else (found.limit_tokens, found.tokenizer)


@pytest.mark.parametrize("flavour", list(FLAVOURS))
def test_the_limit_is_recorded_reused_without_the_network_and_a_change_moves_the_generation(
    flavour: str, neo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kind, tokenizer, source = FLAVOURS[flavour]
    port = free_port()
    fake = FakeServer(flavour, 512, port)
    _configure(monkeypatch, kind, fake.base_url)
    undiscovered = configured_generation(load_settings())
    with fake.running():
        found, changed = _contact()
        assert changed and found.limit_tokens == 512
        assert _recorded() == (512, tokenizer)
        asked = len(fake.requests)
        band = band_for(load_settings())
        first = configured_generation(load_settings())
        assert len(fake.requests) == asked  # the digest read the ledger, not the server
    assert (band.limit_tokens, band.source) == (512, source)
    assert first != undiscovered
    # Nothing listens now: every digest still reads the recorded limit.
    assert configured_generation(load_settings()) == first
    assert _contact() == (found, False)  # a contact that finds nothing keeps the record
    assert configured_generation(load_settings()) == first
    # Restarted with another limit: recorded at the next contact, a new generation.
    with FakeServer(flavour, 1024, port).running():
        again, changed = _contact()
    assert changed and again.limit_tokens == 1024 and _recorded() == (1024, tokenizer)
    second = configured_generation(load_settings())
    assert second not in (first, undiscovered)
    assert band_for(load_settings()).limit_tokens == 1024


def test_the_in_process_model_records_its_own_window_and_tokenizer(
    neo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neo_assets.embedding.providers import sentence_transformers as st  # noqa: PLC0415

    monkeypatch.setenv("NEO_EMBEDDING_PROVIDER", "sentence_transformers")
    if st.static_input_limit(None) is None:
        pytest.skip("the sentence-transformers extra is not installed")
    before = configured_generation(load_settings())
    found, changed = _contact()
    assert changed and (found.limit_tokens, found.tokenizer) == (256, "bundled")
    assert _recorded() == (256, "bundled")
    band = band_for(load_settings())
    assert (band.limit_tokens, band.source, band.exact) == (256, SOURCE_TOKENIZER, True)
    assert configured_generation(load_settings()) == before  # its files said so already


@pytest.mark.parametrize("flavour", ["llama.cpp", "ollama"])
def test_the_settings_override_what_the_server_said(
    flavour: str, neo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kind = FLAVOURS[flavour][0]
    fake = FakeServer(flavour, 512, free_port())
    _configure(monkeypatch, kind, fake.base_url)
    with fake.running():
        _contact()
    monkeypatch.setenv("NEO_EMBEDDING_CONTEXT_TOKENS", "300")
    monkeypatch.setenv("NEO_EMBEDDING_TOKENIZER", "estimate")
    band = band_for(load_settings())
    assert (band.limit_tokens, band.exact) == (300, False)


def test_a_server_that_says_nothing_keeps_the_configured_band(
    neo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeServer("none", 512, free_port())
    _configure(monkeypatch, "openai_compatible", fake.base_url)
    with fake.running():
        found, changed = _contact()
    assert found.limit_tokens is None and found.tokenizer is None
    band = band_for(load_settings())
    assert band.limit_tokens == load_settings().embedding.context_tokens and not band.exact
