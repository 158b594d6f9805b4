"""Small builders for metadata the Dagster UI renders (tables) and plots (numbers)."""

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg
import pandas as pd

_PREVIEW_ROWS = 10


def preview_table(frame: pd.DataFrame, columns: Sequence[str], rows: int = _PREVIEW_ROWS) -> Any:
    """A table preview of the first ``rows`` rows of ``columns`` (strings, bounded)."""
    cols = [c for c in columns if c in frame.columns]
    records = [
        dg.TableRecord({c: _cell(r[c]) for c in cols})
        for r in frame[cols].head(rows).to_dict("records")
    ]
    schema = dg.TableSchema(columns=[dg.TableColumn(c, "string") for c in cols])
    return dg.MetadataValue.table(records=records, schema=schema)


def _cell(value: Any) -> str:
    text = "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)
    return text if len(text) <= 120 else text[:117] + "..."


def counts_metadata(counts: Mapping[str, Any]) -> dict[str, Any]:
    """Every numeric count as its own metadata entry, so the UI plots it over time."""
    return {
        f"count_{k}": int(v)
        for k, v in sorted(counts.items())
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
