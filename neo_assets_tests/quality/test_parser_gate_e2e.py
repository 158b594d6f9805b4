"""The quality gate on a parser-version switch, end to end through real Dagster sweep
runs, real Chroma and a real git history: a tenant bumps its repo's parser version to one
that answers worse on this repo (neo-code 2.0.0's code units after 1.0.0's line windows:
here a window holds several of the small functions asked about); the sweep builds the new
chunks and evaluates both, the gate refuses, and the old parser's chunks
keep serving (query, status, the ``quality_gate`` check), survive reconciliation, until an
operator's recorded decision lets the new ones serve."""

import asyncio
from pathlib import Path

import dagster as dg
import pytest
from typer.testing import CliRunner

from neo_assets.cli.app import app
from neo_assets.cli.launch import run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.generations.serving import configured_generation
from neo_assets.quality.gate import parser_label
from neo_assets.quality.records import latest_scores
from neo_assets.query.one_shot import run_query
from neo_assets.reconcile.tenant import reconcile_tenant
from neo_assets.services.handles import open_ledger, open_store
from neo_assets.status.report import build_status
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.quality.test_quality_gate_e2e import TOPICS, history
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


def parsers_answering(settings, question: str) -> set[str]:
    """The parser versions of the chunks that answer ``question``."""
    with open_ledger(settings) as ledger, open_store(settings) as store:
        answer = asyncio.run(
            run_query(settings, store, ledger, question, tenant="acme", repo=None, k=5)
        )
    assert answer["results"], answer
    return {r["metadata"]["parserVersion"] for r in answer["results"]}


def repo_status(settings, tenants) -> dict:
    with open_ledger(settings) as ledger, open_store(settings) as store:
        return build_status(settings, tenants, ledger, store)["repos"][0]


def check_evaluations(instance: dg.DagsterInstance, run_id: str) -> dict:
    return {
        e.dagster_event.event_specific_data.check_name: e.dagster_event.event_specific_data
        for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    }


def test_a_parser_switch_that_answers_worse_is_refused_until_an_operator_allows_it(
    neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = history(tmp_path)
    path = tmp_path / "tenants.yaml"
    write_tenants(path, {"acme": [repo_entry("tools", repo.path, version="1.0.0")]})
    monkeypatch.setenv("NEO_TENANTS_FILE", str(path))
    monkeypatch.setenv("NEO_SERVE_HYBRID", "false")  # the vectors alone answer
    monkeypatch.setenv("NEO_RECONCILIATION_ENABLED", "true")
    # The scene (2.0.0 answering worse by more than the margin) was built on the v1 hashing
    # features' figures; the gate is what is tested, not the embedder.
    monkeypatch.setenv("NEO_EMBEDDING_MODEL", "neo-hashing-v1")
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    try:
        settings = load_settings()
        generation = configured_generation(settings)
        [first] = run_sweeps(settings, load_tenants(path), instance)
        assert first["outcome"] == "complete", first
        assert parsers_answering(settings, TOPICS[6][2]) == {"1.0.0"}

        # The tenant bumps the parser to one that answers worse.
        write_tenants(path, {"acme": [repo_entry("tools", repo.path, version="2.0.0")]})
        tenants = load_tenants(path)
        [second] = run_sweeps(settings, tenants, instance)
        assert second["outcome"] == "complete", second
        with open_ledger(settings) as ledger:
            scores = latest_scores(ledger, "acme", ["tools"])
        old = scores[("tools", parser_label(generation, ("neo-code", "1.0.0")))]
        new = scores[("tools", parser_label(generation, ("neo-code", "2.0.0")))]
        assert old.question_set == new.question_set and old.questions == len(TOPICS)
        assert new.mrr_at_10 < old.mrr_at_10 - settings.quality.margin, (old, new)

        # Refused: the old parser's units keep answering, and status and the check say so.
        assert parsers_answering(settings, TOPICS[6][2]) == {"1.0.0"}
        gate = repo_status(settings, tenants)["parserGate"]
        assert gate["state"] == "refused" and gate["candidate"] == "neo-code@2.0.0", gate
        assert gate["serving"] == "neo-code@1.0.0"
        assert "neo-assets quality allow acme parser:neo-code@2.0.0" in gate["reason"]
        check = check_evaluations(instance, second["runId"])["quality_gate"]
        assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
        assert "parser neo-code@2.0.0" in check.metadata["summary"].value
        out = CliRunner().invoke(app, ["status"], catch_exceptions=False)
        assert "parser neo-code@2.0.0 held by the quality gate (refused" in out.output

        # Reconciliation keeps the serving parser's rows: they are not superseded yet.
        with open_ledger(settings) as ledger, open_store(settings) as store:
            reconcile_tenant(settings, tenants, "acme", store, ledger, write=True)
        assert parsers_answering(settings, TOPICS[6][2]) == {"1.0.0"}

        # An operator's recorded decision lets the new parser serve.
        res = CliRunner().invoke(
            app,
            [
                "quality",
                "allow",
                "acme",
                "parser:neo-code@2.0.0",
                "--reason",
                "units for the tools",
            ],
        )
        assert res.exit_code == 0, res.output
        assert parsers_answering(settings, TOPICS[6][2]) == {"2.0.0"}
        gate = repo_status(settings, tenants)["parserGate"]
        assert gate is None or gate["state"] == "overridden", gate
    finally:
        instance.dispose()
