"""validate_vectors: only a full, finite, non-zero matrix of the right shape gets through."""

import numpy as np
import pytest

from neo_assets.core import codes
from neo_assets.embedding.failures import EmbedFailure, classify_failure
from neo_assets.embedding.vectors import validate_vectors


def _invalid(raw: object, count: int, dims: int) -> EmbedFailure:
    with pytest.raises(EmbedFailure) as info:
        validate_vectors(raw, count, dims, operation_label="op", provider="p")
    assert info.value.code == codes.KB_VECTOR_EMBED_INVALID_VECTORS
    assert classify_failure(info.value) == codes.KB_VECTOR_EMBED_INVALID_VECTORS
    assert info.value.operation_label == "op"
    return info.value


def test_valid_lists_become_contiguous_float32() -> None:
    out = validate_vectors([[1, 2, 3], [0.5, -1, 0]], 2, 3)
    assert out.dtype == np.float32
    assert out.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(out, np.array([[1, 2, 3], [0.5, -1, 0]], dtype=np.float32))


def test_valid_ndarray_passes_and_keeps_values() -> None:
    raw = np.arange(1, 13, dtype=np.float64).reshape(4, 3)
    out = validate_vectors(raw, 4, 3)
    assert out.shape == (4, 3)
    np.testing.assert_allclose(out, raw)


def test_zero_expected_and_empty_raw_is_an_empty_matrix() -> None:
    out = validate_vectors([], 0, 8)
    assert out.shape == (0, 8)
    assert out.dtype == np.float32


def test_too_few_vectors() -> None:
    failure = _invalid([[1.0, 2.0]], 2, 2)
    assert "expected 2 vectors, got 1" in failure.detail


def test_too_many_vectors() -> None:
    failure = _invalid([[1.0, 2.0]] * 3, 2, 2)
    assert "got 3" in failure.detail


def test_vectors_where_none_expected() -> None:
    _invalid([[1.0, 2.0]], 0, 2)


def test_uniform_wrong_dimension() -> None:
    failure = _invalid([[1.0, 2.0, 3.0]] * 2, 2, 4)
    assert "dimension 4" in failure.detail


def test_one_ragged_row_is_named() -> None:
    failure = _invalid([[1.0, 2.0], [1.0], [3.0, 4.0]], 3, 2)
    assert "rows 1" in failure.detail


def test_nan_row_is_named() -> None:
    failure = _invalid([[1.0, 2.0], [float("nan"), 1.0]], 2, 2)
    assert "NaN" in failure.detail and "rows 1" in failure.detail


@pytest.mark.parametrize("value", [float("inf"), float("-inf")])
def test_infinite_values(value: float) -> None:
    _invalid([[value, 1.0]], 1, 2)


def test_overflow_beyond_float32_is_infinite() -> None:
    # Finite as float64, inf once cast: it would be written as inf, so it is refused.
    _invalid([[1e300, 1.0]], 1, 2)


def test_none_value_is_not_finite() -> None:
    _invalid([[None, 1.0]], 1, 2)


def test_all_zero_row() -> None:
    failure = _invalid([[1.0, 0.0], [0.0, 0.0]], 2, 2)
    assert "all-zero" in failure.detail and "rows 1" in failure.detail


def test_non_numeric_values() -> None:
    _invalid([["a", "b"]], 1, 2)


def test_not_a_matrix() -> None:
    _invalid([1.0, 2.0], 2, 1)


def test_many_bad_rows_are_listed_boundedly() -> None:
    raw = np.zeros((50, 4))
    failure = _invalid(raw, 50, 4)
    assert "(+42 more)" in failure.detail
