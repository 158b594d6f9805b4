"""Every sweep materialization carries numbers the UI plots, a markdown summary and, where
there are rows, a table preview."""

from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from neo_assets.cli.launch import run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.defs.metadata import SWEEP_METRICS, markdown_table, status_summary, sweep_numbers
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

NUMERIC = (dg.IntMetadataValue, dg.FloatMetadataValue)
FILES = {
    "widgets/core.py": "class Widget:\n    def render(self):\n        return 'w'\n",
    "README.md": "# Widgets\n\n## Use\n\nCall render.\n",
    "vendor/lib.py": "def vendored():\n    pass\n",
}


@pytest.fixture
def swept(neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    repo = GitRepo(tmp_path / "widgets")
    for path, text in FILES.items():
        repo.write(path, text)
    repo.commit("initial", when=1_700_000_000)
    tenants = write_tenants(
        tmp_path / "tenants.yaml",
        {"acme": [repo_entry("widgets", repo.path, exclude=["vendor/**"])]},
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    results = run_sweeps(load_settings(), load_tenants(tenants), instance)
    assert [r["outcome"] for r in results] == ["complete"]
    yield instance
    instance.dispose()


def _latest(instance: dg.DagsterInstance, key: str) -> dict:
    records = instance.fetch_materializations(dg.AssetKey(key), limit=1).records
    assert records, key
    return dict(records[0].asset_materialization.metadata)


def test_sweep_materializations_carry_plottable_numbers_summaries_and_previews(swept) -> None:
    census = _latest(swept, "fence_census")
    for name in SWEEP_METRICS:
        assert isinstance(census.get(name), NUMERIC), (name, census.get(name))
    assert census["new"].value == census["rows"].value > 0
    assert census["skipped"].value == 0 and census["deferred"].value == 0
    assert census["sweep_seconds"].value > 0
    assert "**complete**" in census["summary"].value

    embeddings = _latest(swept, "kb_embeddings")
    for name in set(SWEEP_METRICS) - {"sweep_seconds"}:
        assert isinstance(embeddings.get(name), NUMERIC), name
    assert isinstance(embeddings["summary"], dg.MarkdownMetadataValue)
    assert isinstance(embeddings["strike_rows"], dg.TableMetadataValue)
    # Each count is plotted under its name from before the camelCase counts: a plot's
    # history is its name's.
    plotted = {k for k in embeddings if k.startswith("count_")}
    assert {
        "count_embedded",
        "count_already_present",
        "count_already_fenced",
        "count_fenced_poison",
        "count_fenced_undeliverable",
    } <= plotted
    assert all(k == k.lower() for k in plotted), plotted

    envelope = _latest(swept, "repo_envelope")
    assert isinstance(envelope["summary"], dg.MarkdownMetadataValue)
    assert "| excluded | 1 |" in envelope["summary"].value
    assert isinstance(envelope["preview"], dg.TableMetadataValue)
    assert [r.data for r in envelope["preview"].records] == [
        {"path": p, "size": str(len(FILES[p])), "yielded": str(y), "skip_reason": r}
        for p, y, r in [
            ("README.md", True, ""),
            ("vendor/lib.py", False, "excluded"),
            ("widgets/core.py", True, ""),
        ]
    ]
    assert (envelope["paths"].value, envelope["yielded_paths"].value) == (3, 2)
    assert (envelope["skipped_paths"].value, envelope["dagster/row_count"].value) == (1, 3)
    assert envelope["skip_reasons"].value == {"excluded": 1}

    chunks = _latest(swept, "chunk_generation")
    assert "neo-code 1.0.0" in chunks["summary"].value
    assert isinstance(chunks["preview"], dg.TableMetadataValue)

    status = _latest(swept, "kb_status")
    assert "**1** complete" in status["summary"].value


def test_sweep_numbers_names_every_metric_but_the_sweep_time() -> None:
    counts = {
        "embedded": 6,
        "alreadyPresent": 4,
        "alreadyFenced": 1,
        "deferred": 2,
        "fencedPoison": 1,
        "fencedUndeliverable": 3,
    }
    numbers = sweep_numbers(counts, strikes=2, seconds=2.0)
    assert set(numbers) == set(SWEEP_METRICS) - {"sweep_seconds"}
    assert numbers == {
        "rows": 10,
        "new": 6,
        "skipped": 5,
        "fenced_poison": 1,
        "fenced_undeliverable": 3,
        "strikes": 2,
        "deferred": 2,
        "chunks_per_second": 3.0,
    }
    assert sweep_numbers({"embedded": True}, 0, 0.0)["new"] == 0  # a bool is no count
    assert sweep_numbers({}, 0, 0.0)["chunks_per_second"] == 0.0


def test_markdown_table_escapes_cells() -> None:
    table = markdown_table([{"a": "x|y", "b": None}, {"a": "line\nbreak", "b": 3}], ["a", "b"])
    assert table.splitlines() == [
        "| a | b |",
        "| --- | --- |",
        "| x\\|y |   |",
        "| line break | 3 |",
    ]


def test_status_summary_without_repos() -> None:
    assert status_summary(pd.DataFrame()).value == "No repo is declared."


BROKEN_JS = "function broken( {\n  if (x {\n    return ]];\n  }\n}\n" * 3
BROKEN_GO = "package p\n\nfunc broken( {\n\tif x {{\n\treturn ]]\n}\n" * 3


def test_windowed_files_are_counted_per_reason_on_the_chunk_stage(
    neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = GitRepo(tmp_path / "web")
    repo.write("src/ok.js", "export function ok() {\n  return 1;\n}\n")
    repo.write("src/broken.js", BROKEN_JS)
    repo.write("src/also_broken.js", BROKEN_JS)
    repo.write("cmd/broken.go", BROKEN_GO)
    repo.write("notes.txt", "plain text is windowed by design, not as a fallback\n")
    repo.commit("initial", when=1_700_000_000)
    tenants = write_tenants(
        tmp_path / "tenants.yaml", {"acme": [repo_entry("web", repo.path, version="2.0.0")]}
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    try:
        results = run_sweeps(load_settings(), load_tenants(tenants), instance)
        assert [r["outcome"] for r in results] == ["complete"]
        chunks = _latest(instance, "chunk_generation")
    finally:
        instance.dispose()
    assert chunks["fallback_files"].value == {"syntax-errors": 3}
    assert chunks["windowed_files"].value == 3
    assert "3 files windowed: syntax-errors" in chunks["summary"].value
