"""A function whose file grows above it keeps its chunk id (the id is its content, path and
name, not its place), so its row is present and not written again; its lines must still
be the file's. Before the restamp a query answered ``m.py:5-6`` for a function that a
commit had moved to lines 11-12. Real git history, real Dagster sweep runs, real Chroma,
two embedding generations side by side."""

import asyncio
from pathlib import Path

import dagster as dg
import pytest

from neo_assets.cli.launch import run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.query.one_shot import run_query
from neo_assets.services.handles import open_ledger, open_store
from neo_assets.sweep.rules.moved_lines import moved_lines
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

BODY = "def alpha(x):\n    return x + 1\n\n\ndef beta(y):\n    return y * 2\n"
HEADER = "import os\nimport sys\n\nLIMIT = 10\n\n\n"


def test_only_rows_whose_lines_differ_are_restamped_and_only_their_lines() -> None:
    declared = {"a": (11, 12), "b": (1, 2), "c": (None, None)}
    stored = {
        "a": {"startLine": 5, "endLine": 6, "tenantId": "acme"},
        "b": {"startLine": 1, "endLine": 2},
        "c": {"startLine": 3, "endLine": 4},
        "z": {"startLine": 9, "endLine": 9},  # not declared: not this sweep's to judge
    }
    assert moved_lines(declared, stored) == {"a": {"startLine": 11, "endLine": 12}}


def _stamps(settings, name: str) -> dict[str, dict]:
    """Each generation collection's metadata of the function ``name``."""
    out = {}
    with open_store(settings) as store:
        for generation in store.generation_siblings():
            for row in generation.tenant_rows("acme"):
                if row["metadata"].get("name") == name:
                    out[generation.collection_name] = row["metadata"]
    return out


def _lines(settings, name: str) -> dict[str, tuple[int, int]]:
    """Each generation collection's (startLine, endLine) of the function ``name``."""
    return {c: (md["startLine"], md["endLine"]) for c, md in _stamps(settings, name).items()}


def test_a_function_pushed_down_its_file_answers_with_its_new_lines_in_every_generation(
    neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.write("pkg/m.py", BODY)
    repo.commit("two functions", when=1_700_000_000)
    tenants_path = write_tenants(
        tmp_path / "tenants.yaml", {"acme": [repo_entry("tools", repo.path, version="2.0.0")]}
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants_path))
    monkeypatch.setenv("NEO_QUALITY_AFTER_SWEEP", "false")
    tenants = load_tenants(tenants_path)
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    try:
        [first] = run_sweeps(load_settings(), tenants, instance)
        assert first["outcome"] == "complete", first
        # A second embedding generation beside the first (another vector width).
        monkeypatch.setenv("NEO_EMBEDDING_DIMENSIONS", "64")
        settings = load_settings()
        [second] = run_sweeps(settings, tenants, instance, force=True)
        assert second["outcome"] == "complete", second
        before = _lines(settings, "beta")
        assert len(before) == 2 and set(before.values()) == {(5, 6)}, before
        stamped = _stamps(settings, "beta")

        repo.write("pkg/m.py", HEADER + BODY)
        repo.commit("a header above the functions", when=1_700_000_100)
        [third] = run_sweeps(settings, tenants, instance, force=True)
        assert third["outcome"] == "complete", third
        after = _lines(settings, "beta")
        assert set(after.values()) == {(11, 12)}, after
        assert set(_lines(settings, "alpha").values()) == {(7, 8)}
        # Only the lines were written: every other stamp is the one the row was added with.
        for collection, md in _stamps(settings, "beta").items():
            old = stamped[collection]
            assert {**old, "startLine": 11, "endLine": 12} == md, collection
        counts = third["counts"]
        # alpha and beta, in each of the two generations; the module row is new text.
        assert counts["linesMoved"] == 4 and counts["embedded"] == 1, counts
        with open_ledger(settings) as ledger, open_store(settings) as store:
            answer = asyncio.run(
                run_query(settings, store, ledger, "beta", tenant="acme", repo=None, k=3)
            )
        [hit] = [r for r in answer["results"] if r["metadata"]["name"] == "beta"]
        assert (hit["metadata"]["startLine"], hit["metadata"]["endLine"]) == (11, 12)
        lines = (HEADER + BODY).split("\n")
        assert lines[11 - 1] == "def beta(y):"
        # A sweep that moves nothing restamps nothing.
        [again] = run_sweeps(settings, tenants, instance, force=True)
        assert again["counts"].get("linesMoved", 0) == 0, again["counts"]
    finally:
        instance.dispose()
