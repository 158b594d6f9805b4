import numpy as np

from neo_assets.query.rules.nearest import nearest, unit_rows


def test_nearest_ranks_the_given_rows_by_cosine_and_ignores_the_others() -> None:
    matrix = unit_rows(np.array([[1, 0], [0, 1], [1, 1], [-1, 0], [0.9, 0.1]], dtype=np.float32))
    got = nearest(matrix, np.array([1, 2, 3]), np.array([2.0, 0.0]), 2)
    assert [pos for pos, _ in got] == [1, 0]  # rows 2 then 1; rows 0 and 4 not asked
    assert got[0][1] == np.float32(np.sqrt(0.5)).item() or abs(got[0][1] - 0.7071) < 1e-4
    assert abs(got[1][1]) < 1e-6


def test_ties_at_the_cut_go_to_the_lower_position_whatever_the_scan_order() -> None:
    matrix = unit_rows(np.array([[1, 0]] * 6, dtype=np.float32))
    for rows in (np.arange(6), np.arange(6)[::-1].copy()):
        got = nearest(matrix, rows, np.array([1.0, 0.0]), 3)
        assert [pos for pos, _ in got] == [0, 1, 2]


def test_nothing_asked_or_a_zero_question_finds_nothing() -> None:
    matrix = unit_rows(np.array([[1, 0], [0, 0]], dtype=np.float32))
    assert nearest(matrix, np.array([], dtype=np.int64), np.array([1.0, 0.0]), 3) == []
    assert nearest(matrix, np.array([0]), np.array([0.0, 0.0]), 3) == []
    assert nearest(matrix, np.array([0, 1]), np.array([1.0, 0.0]), 0) == []
    assert [p for p, _ in nearest(matrix, np.array([0, 1]), np.array([1.0, 0.0]), 5)] == [0, 1]
