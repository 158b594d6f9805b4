"""Vector validation: what a provider returns is checked before anything can be written;
a failure names rows by index only. Design: docs/design/embedding.md#failures"""

from collections.abc import Sequence
from typing import Any

import numpy as np

from neo_assets.core import codes
from neo_assets.embedding.failures import EmbedFailure

_MAX_LISTED_ROWS = 8


def _rows(indices: np.ndarray) -> str:
    listed = ", ".join(str(int(i)) for i in indices[:_MAX_LISTED_ROWS])
    more = len(indices) - _MAX_LISTED_ROWS
    return listed + (f" (+{more} more)" if more > 0 else "")


def _invalid(detail: str, operation_label: str, provider: str | None) -> EmbedFailure:
    return EmbedFailure(
        codes.KB_VECTOR_EMBED_INVALID_VECTORS,
        operation_label=operation_label,
        detail=detail,
        provider=provider,
    )


SETTING_DIMENSIONS = "NEO_EMBEDDING_DIMENSIONS"


class DimensionMismatchError(ValueError):
    """The provider's vectors are not as wide as configured: a configuration error."""

    code = codes.KB_VECTOR_EMBED_DIMENSION_MISMATCH

    def __init__(self, provider: str, model: str, configured: int, answered: int) -> None:
        self.provider = provider
        self.model = model
        self.configured = configured
        self.answered = answered
        super().__init__(
            f"{SETTING_DIMENSIONS}={configured} but the provider {provider} (model "
            f"{model!r}) answers {answered}-d vectors: set {SETTING_DIMENSIONS}={answered} "
            f"(a new embedding generation: every repo is embedded again), or point "
            f"NEO_EMBEDDING_MODEL at a {configured}-d model"
        )


def _mismatch(
    configured: int, answered: int, operation_label: str, provider: str | None
) -> EmbedFailure:
    failure = _invalid(
        f"expected dimension {configured}, got {answered}", operation_label, provider
    )
    failure.answered_dimensions = answered  # type: ignore[attr-defined]
    return failure


def answered_dimensions(exc: BaseException) -> int | None:
    """The one width every row of a refused answer had, when that is what was wrong."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        width = getattr(link, "answered_dimensions", None)
        if isinstance(width, int):
            return width
        link = link.__cause__ or link.__context__
    return None


def validate_vectors(
    raw: Sequence[Sequence[float]] | np.ndarray | Any,
    expected_count: int,
    dimensions: int,
    *,
    operation_label: str = "",
    provider: str | None = None,
) -> np.ndarray:
    """``raw`` as a C-contiguous float32 ``(expected_count, dimensions)`` array, or raise
    ``EmbedFailure(KB_VECTOR_EMBED_INVALID_VECTORS)`` (wrong count or width, NaN/inf also
    after the cast, an all-zero row)."""
    if expected_count == 0 and (raw is None or len(raw) == 0):
        return np.zeros((0, dimensions), dtype=np.float32)
    if isinstance(raw, list | tuple):
        # Name a ragged row before numpy refuses the whole matrix without saying which.
        widths = [len(row) if isinstance(row, Sequence | np.ndarray) else -1 for row in raw]
        wrong = np.flatnonzero(np.asarray(widths) != dimensions)
        if len(widths) == expected_count and wrong.size:
            got = sorted({widths[i] for i in wrong})
            if wrong.size == len(widths) and len(got) == 1 and got[0] > 0:
                raise _mismatch(dimensions, got[0], operation_label, provider)
            raise _invalid(
                f"expected dimension {dimensions}, got {got} in rows {_rows(wrong)}",
                operation_label,
                provider,
            )
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            array = np.asarray(raw, dtype=np.float64).astype(np.float32)
    except (TypeError, ValueError) as exc:
        # Ragged rows or non-numbers: numpy cannot make a matrix of them.
        raise _invalid(
            f"vectors are not a numeric matrix ({type(exc).__name__})", operation_label, provider
        ) from exc
    if array.ndim != 2:
        raise _invalid(f"vectors have shape {array.shape}, not 2-d", operation_label, provider)
    count, width = array.shape
    if count != expected_count:
        raise _invalid(f"expected {expected_count} vectors, got {count}", operation_label, provider)
    if width != dimensions:
        raise _mismatch(dimensions, width, operation_label, provider)
    not_finite = np.flatnonzero(~np.isfinite(array).all(axis=1))
    if not_finite.size:
        raise _invalid(
            f"non-finite values (NaN/inf) in rows {_rows(not_finite)}", operation_label, provider
        )
    zero = np.flatnonzero(~array.any(axis=1))
    if zero.size:
        raise _invalid(f"all-zero vectors in rows {_rows(zero)}", operation_label, provider)
    return np.ascontiguousarray(array)
