"""Vector validation: what a provider returns is checked before anything can be written.

A wrong count, a wrong dimension, a NaN/inf or an all-zero row is a provider fault
(KB_VECTOR_EMBED_INVALID_VECTORS): such a batch is never written, and the failure names
rows by index only, never by content.
"""

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


def validate_vectors(
    raw: Sequence[Sequence[float]] | np.ndarray | Any,
    expected_count: int,
    dimensions: int,
    *,
    operation_label: str = "",
    provider: str | None = None,
) -> np.ndarray:
    """``raw`` as a C-contiguous float32 ``(expected_count, dimensions)`` array, or raise.

    Raises EmbedFailure(KB_VECTOR_EMBED_INVALID_VECTORS) on a wrong count, a wrong or
    ragged dimension, a non-numeric value, NaN/inf (also after the float32 cast: a value
    beyond float32's range becomes inf), or an all-zero row (no direction: cosine
    distance to it is undefined).
    """
    if expected_count == 0 and (raw is None or len(raw) == 0):
        return np.zeros((0, dimensions), dtype=np.float32)
    if isinstance(raw, list | tuple):
        # Name a ragged row before numpy refuses the whole matrix without saying which.
        widths = [len(row) if isinstance(row, Sequence | np.ndarray) else -1 for row in raw]
        wrong = np.flatnonzero(np.asarray(widths) != dimensions)
        if len(widths) == expected_count and wrong.size:
            got = sorted({widths[i] for i in wrong})
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
        raise _invalid(f"expected dimension {dimensions}, got {width}", operation_label, provider)
    not_finite = np.flatnonzero(~np.isfinite(array).all(axis=1))
    if not_finite.size:
        raise _invalid(
            f"non-finite values (NaN/inf) in rows {_rows(not_finite)}", operation_label, provider
        )
    zero = np.flatnonzero(~array.any(axis=1))
    if zero.size:
        raise _invalid(f"all-zero vectors in rows {_rows(zero)}", operation_label, provider)
    return np.ascontiguousarray(array)
