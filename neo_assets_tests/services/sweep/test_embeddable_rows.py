"""embed_step's rows to embed: only those whose text is at hand, with their stamps' fields."""

import numpy as np
import pandas as pd
import pytest

from neo_assets.services.sweep.steps import CHUNK_COLUMNS, _embeddable_by_id


@pytest.mark.parametrize("dtype", [object, "string"])
def test_rows_without_text_are_left_out_whatever_the_missing_marker(dtype: object) -> None:
    frame = pd.DataFrame(
        {
            "chunk_id": ["a", "b", "c", "d"],
            "source_path": ["x.py", "x.py", "y.py", "z.py"],
            "kind": ["function", "class", "module", "function"],
            "name": ["f", "C", "y", "g"],
            "start_line": [1, 3, None, 1],
            "end_line": [2, 9, None, 1],
            "content": pd.Series(["def f(): ...", None, np.nan, "def g(): ..."], dtype=dtype),
            "language": ["python", "python", None, "python"],
            "qualified_name": ["x.f", "x.C", None, "z.g"],
            "parent": ["", "", None, ""],
            "blob": ["1", "1", "2", "3"],
        },
        columns=[*CHUNK_COLUMNS, "blob"],
    )
    rows = _embeddable_by_id(frame)
    assert list(rows) == ["a", "d"]  # in frame order; b and c could not be read again
    assert rows["d"] == {
        "chunk_id": "d",
        "source_path": "z.py",
        "kind": "function",
        "name": "g",
        "start_line": 1,
        "end_line": 1,
        "content": "def g(): ...",
        "language": "python",
        "qualified_name": "z.g",
        "parent": "",
    }


def test_an_empty_frame_has_nothing_to_embed() -> None:
    assert _embeddable_by_id(pd.DataFrame(columns=[*CHUNK_COLUMNS, "blob"])) == {}
