"""A provider's own limit per input and its tokenizer, asked at a sweep's first contact
(before its chunks are split), so a server works with only its URL and model set. The
findings go to the ledger (``store/provider_limits.py``) when they differ; a server that
does not answer leaves the record as it was. Design: docs/design/embedding.md#band"""

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import httpx

from neo_assets.config.settings import Settings
from neo_assets.embedding.providers.http import DISCOVERY_TIMEOUT_S, bearer
from neo_assets.embedding.rules.band import (
    TOKENIZER_BUNDLED,
    Discovery,
    SizeRefusal,
    discovery_changed,
    learn_from_refusals,
)
from neo_assets.embedding.rules.provider_kinds import REMOTE_KINDS
from neo_assets.store.ledger import Ledger
from neo_assets.store.provider_limits import record_discovery, recorded_discovery

# The llama-cpp-python probe: far longer than any embedding window it could be cut at.
PROBE = "def ping(): return 'pong'\n" * 1024
# The probe embeds one window's worth of tokens: longer than a question about limits.
PROBE_TIMEOUT_S = 60.0


class NoAnswerNow(Exception):
    """The server is there but did not answer what it would have to (a failed probe):
    this contact found nothing, and the record stays as it was."""


class _Client(httpx.Client):
    """GET/POST that answer the decoded body, or None for anything else (a missing
    endpoint, an error, a body that is not JSON). ``reached`` says whether anything
    answered at all."""

    def __init__(self, base_url: str, api_key: str | None, timeout_s: float) -> None:
        super().__init__(base_url=base_url, timeout=timeout_s, headers=bearer(api_key))
        self.reached = False

    def call(
        self, method: str, path: str, payload: Any = None, timeout_s: float | None = None
    ) -> Any:
        try:
            timeout = timeout_s if timeout_s is not None else self.timeout
            response = self.request(method, path, json=payload, timeout=timeout)
        except httpx.HTTPError:
            return None
        self.reached = True
        if response.status_code != 200:
            return None
        try:
            return response.json()
        except ValueError:
            return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def llama_cpp(client: _Client, model: str | None) -> Discovery | None:
    props = client.call("GET", "/props")
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    n_ctx = _int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    if n_ctx is None:
        return None
    return Discovery(n_ctx, "llama.cpp /props default_generation_settings.n_ctx", "llama.cpp")


def tei(client: _Client, model: str | None) -> Discovery | None:
    info = client.call("GET", "/info")
    limit = _int(info.get("max_input_length")) if isinstance(info, dict) else None
    if limit is None:
        return None
    return Discovery(limit, "TEI /info max_input_length", "tei")


def vllm(client: _Client, model: str | None) -> Discovery | None:
    listing = client.call("GET", "/v1/models")
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return None
    entries = [d for d in data if isinstance(d, dict) and _int(d.get("max_model_len"))]
    chosen = next((d for d in entries if d.get("id") == model), entries[0] if entries else None)
    if chosen is None:
        return None
    return Discovery(int(chosen["max_model_len"]), "vLLM /v1/models max_model_len", "vllm")


def llama_cpp_python(client: _Client, model: str | None) -> Discovery | None:
    named = {"model": model} if model else {}
    counted = client.call("POST", "/extras/tokenize/count", {"input": PROBE, **named})
    count = _int(counted.get("count")) if isinstance(counted, dict) else None
    if count is None:
        return None
    body = client.call(
        "POST",
        "/v1/embeddings",
        {"input": [PROBE], "encoding_format": "float", **named},
        timeout_s=PROBE_TIMEOUT_S,
    )
    usage = body.get("usage") if isinstance(body, dict) else None
    embedded = _int(usage.get("prompt_tokens")) if isinstance(usage, dict) else None
    if embedded is None:
        raise NoAnswerNow  # the probe failed (busy, loading): not a reason to forget the limit
    if embedded is not None and embedded < count:
        source = "llama-cpp-python: a probe of {count} tokens was embedded as {embedded}"
        return Discovery(
            embedded, source.format(count=count, embedded=embedded), "llama-cpp-python"
        )
    # Nothing cut: the limit is not known, the counting is.
    return Discovery(None, "llama-cpp-python /extras/tokenize/count", "llama-cpp-python")


def ollama(client: _Client, model: str | None) -> Discovery | None:
    body = client.call("POST", "/api/show", {"model": model})
    info = body.get("model_info") if isinstance(body, dict) else None
    if not isinstance(info, dict):
        return None
    for key, value in sorted(info.items()):
        if str(key).endswith(".context_length") and _int(value):
            return Discovery(int(value), f"ollama /api/show model_info.{key}", None)
    return None


# Per kind, the servers' own answers in the order they are asked (docs/design/embedding.md#band).
ASKERS: dict[str, tuple[Callable[[_Client, str | None], Discovery | None], ...]] = {
    "openai_compatible": (llama_cpp, tei, vllm, llama_cpp_python),
    "ollama": (ollama,),
}


def discover(settings: Settings, timeout_s: float = DISCOVERY_TIMEOUT_S) -> Discovery | None:
    """What the configured provider says about itself now; None when
    it cannot be asked or does not answer."""
    emb = settings.embedding
    if emb.provider == "sentence_transformers":
        from neo_assets.embedding.providers import sentence_transformers as st  # noqa: PLC0415

        limit = st.static_input_limit(emb.model)
        if limit is None:
            return None
        return Discovery(limit, "sentence-transformers max_seq_length", TOKENIZER_BUNDLED)
    askers = ASKERS.get(emb.provider)
    if not askers or not emb.base_url:
        return None
    with _Client(emb.base_url, emb.api_key, timeout_s) as client:
        for ask in askers:
            try:
                found = ask(client, emb.model)
            except NoAnswerNow:
                return None
            if found is not None:
                return found
            if not client.reached:
                return None  # nothing answers there: keep what was recorded
    return Discovery(None, "the server names no limit and no tokenizer", None)


def discover_and_record(
    settings: Settings, ledger: Ledger, now: float | None = None
) -> tuple[Discovery | None, bool]:
    """Ask the provider (``discover``) and record what it said when it differs from the
    ledger's record. Returns (the discovery in force, whether it changed)."""
    emb = settings.embedding
    if emb.provider not in (*REMOTE_KINDS, "sentence_transformers"):
        return None, False
    recorded = recorded_discovery(ledger, emb.provider, emb.base_url, emb.model)
    found = discover(settings)
    if not discovery_changed(recorded, found):
        return recorded, False
    assert found is not None
    record_discovery(
        ledger, emb.provider, emb.base_url, emb.model, found, time.time() if now is None else now
    )
    return found, True


def fit_provider(provider: object, settings: Settings, found: Discovery | None) -> None:
    """Tell a provider built before this contact what it found: Ollama's ``num_ctx`` (the
    context it is asked to run with) and an OpenAI-compatible server's limit per input
    (so llama-cpp-python's silent cut is not probed for again)."""
    if found is None or found.limit_tokens is None:
        return
    if "context_tokens" in settings.embedding.model_fields_set:
        return  # the configured band is the provider's already
    inner = getattr(provider, "inner", provider)
    if hasattr(inner, "num_ctx"):
        inner.num_ctx = found.limit_tokens
    if hasattr(inner, "token_limit"):
        inner.token_limit = found.limit_tokens


def size_refusals(errors: Sequence[Mapping[str, Any]]) -> list[SizeRefusal]:
    """The size refusals among a lane's rows recorded this sweep (their fence receipts)."""
    out = []
    for row in errors:
        details = row.get("details") if isinstance(row, Mapping) else None
        if not isinstance(details, Mapping) or not details.get("recordedThisSweep"):
            continue
        receipt = details.get("receipt")
        if not isinstance(receipt, Mapping) or not receipt.get("sizeRefusal"):
            continue
        suspect = receipt.get("suspect")
        chars = suspect.get("chars") if isinstance(suspect, Mapping) else None
        if not isinstance(chars, int):
            continue
        out.append(
            SizeRefusal(
                chars=chars,
                input_tokens=_int(receipt.get("inputTokens")),
                limit_tokens=_int(receipt.get("providerLimitTokens")),
            )
        )
    return out


def learn_and_record(
    settings: Settings, ledger: Ledger, errors: Sequence[Mapping[str, Any]], now: float
) -> str | None:
    """Record what this sweep's size refusals taught about the provider (``embedding/rules/band``'s
    ``learn_from_refusals``); a notice saying so, None when they taught nothing (what is
    set by hand is not overridden: a set band keeps its limit, a set estimate its ratio)."""
    emb = settings.embedding
    refusals = size_refusals(errors)
    if not refusals or emb.provider not in REMOTE_KINDS:
        return None
    if "context_tokens" in emb.model_fields_set:
        # The band is set by hand: a named limit is not taken over it (the lane's first
        # contact already checks it), but the estimate may still learn.
        refusals = [replace(r, limit_tokens=None) for r in refusals]
    from neo_assets.embedding.band import band_for  # noqa: PLC0415 - band imports the store

    recorded = recorded_discovery(ledger, emb.provider, emb.base_url, emb.model)
    band = band_for(settings, recorded)
    exact = band.exact or "chars_per_token" in emb.model_fields_set
    learned = learn_from_refusals(
        recorded, band.limit_tokens, exact, band.chars_per_token, refusals
    )
    if learned is None:
        return None
    record_discovery(ledger, emb.provider, emb.base_url, emb.model, learned, now)
    after = band_for(settings, learned)
    return (
        f"{len(refusals)} input(s) refused for their size: the band is now "
        f"{after.limit_tokens} tokens at {after.chars_per_token} characters per token "
        f"(was {band.limit_tokens} at {band.chars_per_token}); split smaller and sent again"
    )
