"""A benchmark that imports another (``from bench.sweep import ...``) still starts as a
file, ``python bench/<name>.py`` from the repo root, as CONTRACT.md promises: run as a
file, its folder, not the repo root, is first on ``sys.path``. ``--help`` only (these
parse their arguments before any work); the figures are never timed here."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
IMPORTING = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if "from bench." in p.read_text())


def test_the_benchmarks_that_import_another_are_found() -> None:
    assert {"langchain_side_by_side"} <= set(IMPORTING)


@pytest.mark.parametrize("name", IMPORTING)
def test_a_benchmark_that_imports_another_starts_as_a_file(name: str) -> None:
    done = subprocess.run(
        [sys.executable, f"bench/{name}.py", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout
