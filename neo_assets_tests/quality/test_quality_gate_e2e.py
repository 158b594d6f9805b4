"""The quality gate end to end, through real Dagster sweep runs (``run_sweeps``), real
Chroma and a real git history: each sweep that moves the revision records the repo's
self-evaluation (the ``retrieval_quality`` asset, plotted metadata); a new embedding
generation that answers worse is complete but refused, so the old one keeps serving
(status, query and the ``quality_gate`` check say so); an operator's recorded decision
lets it serve."""

import asyncio
from pathlib import Path

import dagster as dg
import pytest
from typer.testing import CliRunner

from neo_assets.cli.app import app
from neo_assets.cli.launch import run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.generations.serving import configured_generation
from neo_assets.quality.records import latest_scores
from neo_assets.query.one_shot import run_query
from neo_assets.services.handles import open_ledger, open_store
from neo_assets.status.report import build_status
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

# (function name, body line, the commit subject that changes it): the subjects share
# words with the bodies, never the names, so only the vectors can find the answers.
TOPICS = [
    ("parse_header", "name, value = line.split(':', 1)", "split a header line into name and value"),
    (
        "retry_delay",
        "return min(60, 2 ** attempt)",
        "wait twice as long after every failed attempt",
    ),
    (
        "cache_get",
        "return table.setdefault(key, compute(key))",
        "compute a missing table entry once",
    ),
    (
        "slugify",
        "return text.lower().replace(' ', '-')",
        "turn a title into a lower case url fragment",
    ),
    ("clamp", "return max(low, min(high, value))", "keep a number between its low and high bound"),
    (
        "chunked",
        "return [items[i:i + size] for i in range(0, len(items), size)]",
        "split items into lists of a fixed size",
    ),
    ("mean", "return sum(values) / len(values)", "average of a list of values"),
    ("is_palindrome", "return word == word[::-1]", "detect words that read the same backwards"),
]
FILLER = 60
ARGS = "line, attempt, table, key, text, low, high, value, items, size, values, word"


def source(changed: int) -> str:
    """The module with the first ``changed`` topics in their second version."""
    parts = []
    for i, (name, body, _) in enumerate(TOPICS):
        extra = "    # revised\n" if i < changed else ""
        parts.append(f"def {name}({ARGS}):\n{extra}    {body}\n")
    for j in range(FILLER):
        parts.append(f"def helper_{j}(x):\n    return x * {j} + {j * 7} - len(str(x))\n")
    return "\n\n".join(parts)


def history(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "r")
    when = 1_700_000_000
    repo.write("pkg/tools.py", source(0))
    repo.commit("initial import of the toolbox", when=when)
    for i, (_, _, subject) in enumerate(TOPICS):
        repo.write("pkg/tools.py", source(i + 1))
        repo.commit(subject, when=when + 10 * (i + 1))
    return repo


def status(settings, tenants) -> dict:
    with open_ledger(settings) as ledger, open_store(settings) as store:
        return build_status(settings, tenants, ledger, store)["repos"][0]


def test_a_worse_generation_is_refused_by_the_gate_until_an_operator_allows_it(
    neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = history(tmp_path)
    tenants_path = write_tenants(
        tmp_path / "tenants.yaml", {"acme": [repo_entry("tools", repo.path, version="2.0.0")]}
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants_path))
    monkeypatch.setenv("NEO_SERVE_HYBRID", "false")  # the vectors alone answer
    tenants = load_tenants(tenants_path)
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    try:
        settings = load_settings()
        good = configured_generation(settings)
        [first] = run_sweeps(settings, tenants, instance)
        assert first["outcome"] == "complete", first
        with open_ledger(settings) as ledger:
            scores = latest_scores(ledger, "acme", ["tools"])
        before = scores[("tools", good)]
        assert before.questions == len(TOPICS) and before.revision == repo.head()
        assert before.recall_at_10 >= 0.5, before
        # The asset's figures, as the UI plots them.
        [event] = instance.fetch_materializations(
            dg.AssetKey("retrieval_quality"), limit=10
        ).records
        md = event.asset_materialization.metadata
        assert md["recall_at_10"].value == before.recall_at_10 and md["generation"].value == good

        # A generation that answers worse: 4-dimension hashing vectors.
        monkeypatch.setenv("NEO_EMBEDDING_DIMENSIONS", "4")
        settings = load_settings()
        worse = configured_generation(settings)
        [second] = run_sweeps(settings, tenants, instance, force=True)
        assert second["outcome"] == "complete", second
        with open_ledger(settings) as ledger:
            scores = latest_scores(ledger, "acme", ["tools"])
        assert scores[("tools", worse)].question_set == before.question_set
        assert scores[("tools", worse)].mrr_at_10 < before.mrr_at_10 - 0.05
        snap = status(settings, tenants)
        assert snap["servingGeneration"] == good
        gate = snap["qualityGate"]
        assert gate["state"] == "refused" and gate["worse"] == ["tools"], gate
        assert gate["candidate"] == worse and "neo-assets quality allow" in gate["reason"]
        with open_ledger(settings) as ledger, open_store(settings) as store:
            answer = asyncio.run(
                run_query(settings, store, ledger, "average", tenant="acme", repo=None, k=3)
            )
        assert answer["embeddingGeneration"] == good
        # The check the alert sensor delivers, from the sweep's own run.
        evaluations = {
            e.dagster_event.event_specific_data.check_name: e.dagster_event.event_specific_data
            for e in instance.all_logs(
                second["runId"], of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
            )
        }
        check = evaluations["quality_gate"]
        assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
        assert "answers worse than" in check.metadata["summary"].value
        assert evaluations["retrieval_quality_drop"].passed  # the serving one did not drop
        out = CliRunner().invoke(app, ["status"], catch_exceptions=False)
        assert "held by the quality gate (refused" in out.output

        # An operator's recorded decision lets it serve.
        res = CliRunner().invoke(
            app, ["quality", "allow", "acme", worse, "--reason", "smaller vectors for cost"]
        )
        assert res.exit_code == 0, res.output
        snap = status(settings, tenants)
        assert snap["servingGeneration"] == worse and snap["qualityGate"]["state"] == "overridden"
    finally:
        instance.dispose()


def test_a_switch_the_gate_waits_on_is_decided_by_quality_evaluate(
    neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sweeps through the library (no sweep step, so no self-evaluation): the new
    generation waits (pending); `neo-assets quality evaluate` measures both and the
    gate decides."""
    from neo_assets.sweep.context import RepoContext
    from neo_assets_tests.kb_handles import sweep_once

    repo = history(tmp_path)
    tenants_path = write_tenants(
        tmp_path / "tenants.yaml", {"acme": [repo_entry("tools", repo.path, version="2.0.0")]}
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants_path))
    monkeypatch.setenv("NEO_SERVE_HYBRID", "false")
    tenants = load_tenants(tenants_path)
    ctx = RepoContext(tenant=tenants.tenants[0], repo=tenants.tenants[0].repos[0])
    good = configured_generation(load_settings())
    assert sweep_once(ctx)["outcome"] == "complete"
    monkeypatch.setenv("NEO_EMBEDDING_DIMENSIONS", "4")
    settings = load_settings()
    assert sweep_once(ctx)["outcome"] == "complete"
    snap = status(settings, tenants)
    assert snap["servingGeneration"] == good
    assert snap["qualityGate"]["state"] == "pending" and snap["qualityGate"]["waiting"] == ["tools"]
    assert "neo-assets quality evaluate" in snap["qualityGate"]["reason"]

    res = CliRunner().invoke(app, ["quality", "evaluate", "--tenant", "acme", "--json"])
    assert res.exit_code == 0, res.output
    snap = status(settings, tenants)
    assert snap["servingGeneration"] == good and snap["qualityGate"]["state"] == "refused"
    again = CliRunner().invoke(app, ["quality", "evaluate", "--tenant", "acme"])
    assert "no evaluation is due" in again.output
