"""The served rows' vectors, held in the service to search a tenant's rows exactly; an entry
never goes stale. Least recently used tenants go first within a byte budget; one that does
not fit is ``None`` here. Design: docs/design/query.md#tenant-scoped-vectors"""

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from neo_assets.query.rules.nearest import nearest, unit_rows

FETCH_BATCH = 2_000


@dataclass
class _TenantVectors:
    index: dict[str, int] = field(default_factory=dict)
    matrix: np.ndarray | None = None  # unit rows; the first len(index) are in use
    served: object = None  # the served list ``rows`` was computed for (by identity)
    rows: np.ndarray | None = None
    row_ids: list[str] = field(default_factory=list)
    peak: int = 0  # the longest served list since the vectors were last read afresh

    @property
    def nbytes(self) -> int:
        return 0 if self.matrix is None else int(self.matrix.nbytes)


class VectorCache:
    """Per (collection, tenant): the unit vectors of the tenant's rows read so far."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget = budget_bytes
        self._tenants: OrderedDict[tuple[str, str], _TenantVectors] = OrderedDict()
        self._lock = threading.Lock()
        self.fetched = 0  # vectors read from the store, for tests and benches

    def nearest(
        self, collection, tenant_id: str, served: list[str], vector: np.ndarray, n: int
    ) -> dict[str, float] | None:
        """The ``n`` served ids nearest ``vector`` (id -> cosine similarity), or None
        when the tenant's rows do not fit the budget (the caller asks the store)."""
        width = int(np.asarray(vector).shape[-1])
        if self.budget <= 0 or len(served) * width * 4 > self.budget:
            return None
        key = (str(collection.id), tenant_id)
        with self._lock:
            held = self._tenants.pop(key, None) or _TenantVectors()
            self._tenants[key] = held  # most recently used last
            if held.served is not served:
                self._refresh(collection, held, served, width)
            rows, row_ids, matrix = held.rows, held.row_ids, held.matrix
        if matrix is None or rows is None or len(rows) == 0:
            return {}
        return {row_ids[pos]: sim for pos, sim in nearest(matrix, rows, vector, n)}

    def _refresh(self, collection, held: _TenantVectors, served: list[str], width: int) -> None:
        held.peak = max(held.peak, len(served))
        if len(held.index) > 2 * held.peak + FETCH_BATCH:  # mostly rows no longer served
            held.index, held.matrix, held.peak = {}, None, len(served)
        missing = [rid for rid in served if rid not in held.index]
        for start in range(0, len(missing), FETCH_BATCH):
            got = collection.get(ids=missing[start : start + FETCH_BATCH], include=["embeddings"])
            ids, vectors = got["ids"], got["embeddings"]
            if not ids:
                continue
            block = unit_rows(np.asarray(vectors, dtype=np.float32).reshape(len(ids), width))
            base = len(held.index)
            held.matrix = block if held.matrix is None else np.vstack([held.matrix[:base], block])
            for offset, rid in enumerate(ids):
                held.index[rid] = base + offset
            self.fetched += len(ids)
        present = [rid for rid in served if rid in held.index]  # an id not in the store yet
        held.row_ids = present
        held.rows = np.fromiter(
            (held.index[rid] for rid in present), dtype=np.int64, count=len(present)
        )
        held.served = served
        self._evict()

    def _evict(self) -> None:
        total = sum(t.nbytes for t in self._tenants.values())
        while total > self.budget and len(self._tenants) > 1:
            _, gone = self._tenants.popitem(last=False)
            total -= gone.nbytes
