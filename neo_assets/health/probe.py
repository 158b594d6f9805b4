"""One bounded probe: a fixed short text through the provider, under its own deadline read
from the consumer's settings leaf when it runs. Evidence, never an action: it returns a
``ProbeOutcome`` and decides nothing. Design: docs/design/health.md#probe"""

import asyncio
import time
from typing import Any, Literal

import numpy as np

from neo_assets.config.settings import load_settings
from neo_assets.core import codes
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.failures import as_embed_failure, bounded
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.health.rules.canary import CANARY_TEXT, ProbeOutcome, VectorFacts

DeadlineLeaf = Literal["canary_timeout_ms", "recovery_freeze_reprobe_timeout_ms"]
CANARY_DEADLINE_LEAF: DeadlineLeaf = "canary_timeout_ms"
REPROBE_DEADLINE_LEAF: DeadlineLeaf = "recovery_freeze_reprobe_timeout_ms"
_MAX_LABEL = 120


def vector_facts(raw: Any) -> VectorFacts | None:
    """What an answer looks like (``None`` when it is not a numeric matrix)."""
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            array = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if array.ndim != 2:
        return None
    return VectorFacts(
        count=int(array.shape[0]),
        dimensions=(int(array.shape[1]),) if array.shape[0] else (),
        finite=bool(np.isfinite(array).all()),
        nonzero=bool(array.any(axis=1).all()),
    )


async def probe(
    provider: EmbeddingProvider,
    *,
    deadline_leaf: DeadlineLeaf,
    operation_label: str,
    upstream: CancelScope | None = None,
    text: str = CANARY_TEXT,
) -> ProbeOutcome:
    """Embed ``text`` once under a fresh scope whose deadline is ``deadline_leaf`` read now.
    Never raises for a provider failure, deadline or upstream abort (they are the outcome's
    codes); the awaiting task's ``CancelledError`` propagates after cancelling the request."""
    label = bounded(operation_label, _MAX_LABEL)
    timeout_ms = int(getattr(load_settings().health, deadline_leaf))  # the environment now
    scope = upstream.child(label) if upstream is not None else CancelScope(label=label)
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    timer = loop.call_later(timeout_ms / 1000.0, scope.cancel, codes.EMBEDDING_PROBE_TIMEOUT)
    try:
        raw = await scope.run(provider.embed([text], scope, label))
    except Exception as exc:  # noqa: BLE001 - every failure is classified evidence
        elapsed_ms = (time.monotonic() - started) * 1000.0
        failure = as_embed_failure(exc, operation_label=label, provider=provider.name)
        return ProbeOutcome(
            operation_label=label,
            timeout_ms=timeout_ms,
            elapsed_ms=elapsed_ms,
            failure_code=failure.code,
            cause_code=failure.provider_code,
            detail=failure.detail,
        )
    finally:
        timer.cancel()  # the one timer this probe owns, released however it ended
    elapsed_ms = (time.monotonic() - started) * 1000.0
    return ProbeOutcome(
        operation_label=label,
        timeout_ms=timeout_ms,
        elapsed_ms=elapsed_ms,
        facts=vector_facts(raw),
    )


async def probe_and_close(
    provider: EmbeddingProvider,
    *,
    deadline_leaf: DeadlineLeaf,
    operation_label: str,
    upstream: CancelScope | None = None,
) -> ProbeOutcome:
    """``probe`` with a provider built for it, closed (its pool released) before returning."""
    try:
        return await probe(
            provider,
            deadline_leaf=deadline_leaf,
            operation_label=operation_label,
            upstream=upstream,
        )
    finally:
        await provider.aclose()
