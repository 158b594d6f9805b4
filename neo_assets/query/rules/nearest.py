"""Exact nearest rows by cosine similarity over a tenant's own vectors: the cost is what the
tenant holds, and the answer is exact. Design: docs/design/query.md#tenant-scoped-vectors"""

import numpy as np


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` with every row scaled to length 1 (a zero row stays zero)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def nearest(
    unit_matrix: np.ndarray, rows: np.ndarray, vector: np.ndarray, n: int
) -> list[tuple[int, float]]:
    """The ``n`` positions of ``rows`` (indices into ``unit_matrix``) most similar to
    ``vector``, best first, with their cosine similarity; ties go to the lower position
    so the answer never depends on the order of the scan."""
    if n <= 0 or len(rows) == 0:
        return []
    query = np.asarray(vector, dtype=np.float32)
    length = float(np.linalg.norm(query))
    if length == 0.0:
        return []
    unit_query = query / length
    if len(rows) < len(unit_matrix) // 2:  # gather first when the rows are a small part
        sims = unit_matrix[rows] @ unit_query
    else:
        sims = (unit_matrix @ unit_query)[rows]
    n = min(n, len(rows))
    # Everything at least as similar as the n-th best, so ties at the cut are all seen.
    floor = np.partition(sims, len(sims) - n)[len(sims) - n]
    top = np.flatnonzero(sims >= floor)
    order = sorted(top.tolist(), key=lambda pos: (-float(sims[pos]), pos))[:n]
    return [(pos, float(sims[pos])) for pos in order]
