"""Counting inputs with the embedding server's own tokenizer (``NEO_EMBEDDING_TOKENIZER=server``),
so the band is the server's limit exactly. Never falls back to an estimate (part ids would
change with the server's availability). Design: docs/design/embedding.md#band"""

import functools
import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from neo_assets.core import codes
from neo_assets.embedding.rules.band import token_bound

SETTING = "NEO_EMBEDDING_TOKENIZER"
_CACHE_MAX = 200_000


class CountUnavailable(Exception):
    """The server could not count (not reachable, still loading, failing) within the wait:
    the sweep defers with ``code`` before recording anything."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class NoTokenizeEndpoint(ValueError):
    """``NEO_EMBEDDING_TOKENIZER=server`` but the server has no endpoint that counts."""

    code = codes.KB_VECTOR_EMBED_NO_TOKENIZE_ENDPOINT


@dataclass(frozen=True)
class _Endpoint:
    name: str
    path: str

    def payload(self, text: str, model: str | None) -> dict[str, Any]:
        if self.name == "llama.cpp":
            return {"content": text, "add_special": True}
        if self.name == "llama-cpp-python":
            return {"input": text, **({"model": model} if model else {})}
        if self.name == "vllm":
            return {
                "prompt": text,
                "add_special_tokens": True,
                **({"model": model} if model else {}),
            }
        return {"inputs": text, "add_special_tokens": True}  # TEI

    def count(self, body: Any) -> int | None:
        """The token count in an answer of this endpoint, None when it is not its shape."""
        if self.name == "llama.cpp" and isinstance(body, dict):
            tokens = body.get("tokens")
            return len(tokens) if isinstance(tokens, list) else None
        if self.name in ("llama-cpp-python", "vllm") and isinstance(body, dict):
            count = body.get("count")
            return count if isinstance(count, int) and not isinstance(count, bool) else None
        if self.name == "tei" and isinstance(body, list) and body and isinstance(body[0], list):
            return len(body[0])
        return None


ENDPOINTS = (
    _Endpoint("llama.cpp", "/tokenize"),
    _Endpoint("llama-cpp-python", "/extras/tokenize/count"),
    _Endpoint("vllm", "/tokenize"),
    _Endpoint("tei", "/tokenize"),
)


class ServerTokenCounter:
    """Token counts by the server at ``base_url`` ; callable over texts."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None,
        band_tokens: int,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        wait_s: float = 300.0,
        sleep: Any = time.sleep,
        endpoint: str | None = None,
        refused_wait_s: float | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.band_tokens = band_tokens
        self.wait_s = wait_s
        # A port that refuses is waited for this long (a server starting), not the loading
        # wait: a dead server is named within seconds, as the lane names it.
        self.refused_wait_s = wait_s if refused_wait_s is None else min(wait_s, refused_wait_s)
        self._sleep = sleep
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)
        # The endpoint the provider's first contact found (embedding/discovery.py), else
        # found by trying them at first use.
        self.endpoint: _Endpoint | None = next((e for e in ENDPOINTS if e.name == endpoint), None)
        self._cache: dict[bytes, int] = {}
        self.asked = 0  # requests that counted a text (the bench and tests read it)

    def __call__(self, texts: Sequence[str]) -> list[int]:
        out = []
        for text in texts:
            size = token_bound(text)
            if size <= self.band_tokens:
                out.append(size)  # cannot be over the band: not asked (at most a token per byte)
                continue
            key = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
            count = self._cache.get(key)
            if count is None:
                count = self._ask(text)
                if len(self._cache) >= _CACHE_MAX:
                    self._cache.clear()
                self._cache[key] = count
            out.append(count)
        return out

    # ------------------------------------------------------------------ the server
    def _ask(self, text: str) -> int:
        endpoint = self.endpoint or self._discover()
        try:
            body = self._post(endpoint.path, endpoint.payload(text, self.model))
        except _NotThere:
            body = None
        count = endpoint.count(body)
        if count is None:
            raise CountUnavailable(
                codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL,
                f"{self.base_url}{endpoint.path} answered no {endpoint.name} token count",
            )
        self.asked += 1
        return count

    def _discover(self) -> _Endpoint:
        probe = "def ping():\n    return 'pong'\n"
        tried = []
        for endpoint in ENDPOINTS:
            tried.append(endpoint.path)
            try:
                body = self._post(endpoint.path, endpoint.payload(probe, self.model))
            except _NotThere:
                continue
            if endpoint.count(body) is not None:
                self.endpoint = endpoint
                return endpoint
        raise NoTokenizeEndpoint(
            f"{SETTING}=server but {self.base_url} has no tokenize endpoint (tried "
            f"{', '.join(dict.fromkeys(tried))}): set {SETTING}=estimate, or point "
            "NEO_EMBEDDING_BASE_URL at a server that counts tokens (llama.cpp, "
            "llama-cpp-python, vLLM, TEI)"
        )

    def _post(self, path: str, payload: dict[str, Any]) -> Any:
        """POST and decode; waits out a server that is starting or loading (bounded)."""
        url = self.base_url + path
        started = time.monotonic()
        deadline = started + self.wait_s
        delay = 0.25
        while True:
            try:
                response = self._client.post(url, json=payload)
            except httpx.TransportError as exc:
                code = (
                    codes.KB_VECTOR_EMBED_CONNECTION_REFUSED
                    if isinstance(exc, httpx.ConnectError)
                    else codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
                )
                why = f"{url} unreachable ({type(exc).__name__})"
            else:
                if response.status_code == 503:
                    code, why = codes.KB_VECTOR_EMBED_PROVIDER_LOADING, f"{url} answered 503"
                elif response.status_code in (401, 403):
                    raise NoTokenizeEndpoint(
                        f"{url} refused the API key ({response.status_code}): set "
                        "NEO_EMBEDDING_API_KEY to a key the server accepts"
                    )
                elif response.status_code in (400, 404, 405, 422):
                    raise _NotThere
                elif response.status_code >= 400:
                    raise CountUnavailable(
                        codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL,
                        f"{url} answered {response.status_code} while counting tokens",
                    )
                else:
                    try:
                        return response.json()
                    except ValueError:
                        raise _NotThere from None
            bound = (
                started + self.refused_wait_s
                if code == codes.KB_VECTOR_EMBED_CONNECTION_REFUSED
                else deadline
            )
            if time.monotonic() + delay > bound:
                raise CountUnavailable(
                    code,
                    f"{why}: the sweep counts inputs with the server's tokenizer "
                    f"({SETTING}=server) and defers until it answers",
                )
            self._sleep(delay)
            delay = min(delay * 2, 5.0)

    def close(self) -> None:
        self._client.close()


class _NotThere(Exception):
    """This endpoint does not exist on the server (or does not take this shape)."""


# One counter (and its cache) per server and band in this process.
counter_for = functools.cache(ServerTokenCounter)
