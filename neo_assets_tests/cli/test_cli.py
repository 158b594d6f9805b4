"""The `neo-assets` command as a user runs it: a real subprocess, JSON on stdout only."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from neo_assets.sweep.rules.summary import DEPRECATED_SPELLINGS, TIMING_KEYS
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "neo_assets.cli"]


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        CLI + args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    a = GitRepo(tmp_path / "a")
    a.write("render.py", "def render_widget(widget):\n    return widget.draw()\n")
    a.write("notes.md", "# Notes\n\nWidgets render as squares.\n")
    a.commit("a", when=1_700_000_000)
    b = GitRepo(tmp_path / "b")
    b.write("render.py", "def render_widget(widget):\n    return widget.draw()\n")
    b.commit("b", when=1_700_000_000)
    tenants = write_tenants(
        tmp_path / "tenants.yaml",
        {
            "acme": [repo_entry("widgets", a.path)],
            "globex": [repo_entry("tools", b.path)],
        },
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEO_", "DAGSTER_"))}
    env.update({"NEO_HOME": str(tmp_path / "home"), "NEO_TENANTS_FILE": str(tenants)})
    return env


def test_sweep_status_query_json(cli_env: dict[str, str]) -> None:
    swept = _run(["sweep", "--json"], cli_env)
    assert swept.returncode == 0, swept.stderr
    doc = json.loads(swept.stdout)  # exactly one JSON document, nothing else on stdout
    assert {(r["tenantId"], r["repoSlug"], r["outcome"]) for r in doc["repos"]} == {
        ("acme", "widgets", "complete"),
        ("globex", "tools", "complete"),
    }
    for r in doc["repos"]:
        assert {"revision", "counts", "deferredCauseCode"} <= set(r)
        # The counts in both spellings for one release (README, "Deprecated keys"), equal.
        counts = r["counts"]
        assert counts["alreadyPresent"] + counts["embedded"] == counts["chunks"] > 0
        for new, old in DEPRECATED_SPELLINGS.items():
            assert counts[new] == counts[old], (new, old)
        # Each stage's seconds in camelCase, and under its old snake_case name, equal.
        timings = r["timings"]
        assert set(TIMING_KEYS.values()) <= set(timings), timings
        for old, new in TIMING_KEYS.items():
            assert timings[new] == timings[old] >= 0, (new, old)

    again = json.loads(_run(["sweep", "--json"], cli_env).stdout)
    assert {r["outcome"] for r in again["repos"]} == {"skipped"}

    status = _run(["status", "--json"], cli_env)
    assert status.returncode == 0, status.stderr
    repos = json.loads(status.stdout)["repos"]
    keys = {
        "tenantId",
        "repoSlug",
        "outcome",
        "lastIngestedRev",
        "consecutiveFailures",
        "deferredCauseCode",
        "nextDueAt",
        "embeddingGeneration",
        "contentPoisonChunks",
        "undeliverableChunks",
        "strikes",
        "rows",
    }
    assert all(keys <= set(r) for r in repos)
    assert all(r["rows"] > 0 and r["contentPoisonChunks"] == {"count": 0, "ids": []} for r in repos)

    q = _run(["query", "render widget", "--tenant", "globex", "-k", "5", "--json"], cli_env)
    assert q.returncode == 0, q.stderr
    results = json.loads(q.stdout)["results"]
    assert results and {r["metadata"]["tenantId"] for r in results} == {"globex"}
    assert {"id", "score", "document", "metadata"} <= set(results[0])

    # The same filters as HTTP and MCP: kind, path glob (and language), by the same rules.
    docs = _run(["query", "widgets", "--tenant", "acme", "--kind", "section", "--json"], cli_env)
    assert docs.returncode == 0, docs.stderr
    hits = json.loads(docs.stdout)["results"]
    assert hits and {h["path"] for h in hits} == {"notes.md"}
    code = _run(["query", "widgets", "--tenant", "acme", "--path", "*.py", "--json"], cli_env)
    assert {h["path"] for h in json.loads(code.stdout)["results"]} == {"render.py"}
    everything = _run(["query", "x", "--tenant", "acme", "--path", "**", "--json"], cli_env)
    assert everything.returncode == 2 and "matches every path" in everything.stderr

    # Dagster's instance under NEO_HOME holds the CLI's runs, so the UI shows them.
    assert (Path(cli_env["NEO_HOME"]) / "dagster" / "dagster.yaml").exists()


def test_bad_tenants_file_exits_2_naming_file_and_field(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("tenants:\n  - id: Acme!\n    repos: []\n")
    env = {**cli_env, "NEO_TENANTS_FILE": str(bad)}
    done = _run(["sweep", "--json"], env)
    assert done.returncode == 2
    assert str(bad) in done.stderr and "id" in done.stderr
    assert json.loads(done.stdout)["code"] == "CONFIG_INVALID"
    assert not (Path(cli_env["NEO_HOME"]) / "chroma").exists()  # refused before anything ran


def test_a_long_path_in_an_error_is_printed_whole_off_a_terminal(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    # A log or a pipe has no width: a path Rich cut at 80 columns could not be copied or
    # grepped (seen with a pytest-xdist worker's temporary path).
    deep = tmp_path.joinpath(*["a-rather-long-folder-name"] * 5)
    deep.mkdir(parents=True)
    bad = deep / "tenants.yaml"
    bad.write_text("tenants:\n  - id: Acme!\n    repos: []\n")
    done = _run(["status"], {**cli_env, "NEO_TENANTS_FILE": str(bad)})
    assert done.returncode == 2
    assert len(str(bad)) > 120 and str(bad) in done.stderr, done.stderr


def test_unknown_tenant_for_query_is_a_usage_error(cli_env: dict[str, str]) -> None:
    done = _run(["query", "x", "--tenant", "nobody"], cli_env)
    assert done.returncode == 2
    assert "nobody" in done.stderr


def test_query_of_a_repo_the_tenant_does_not_declare_is_a_usage_error(
    cli_env: dict[str, str],
) -> None:
    done = _run(["query", "x", "--tenant", "acme", "--repo", "tools", "--json"], cli_env)
    assert done.returncode == 2, done.stderr
    assert "'tools' is not readable" in done.stderr and "Traceback" not in done.stderr
    assert json.loads(done.stdout)["code"] == "CONFIG_INVALID"


def test_an_unknown_parser_is_refused_up_front_without_a_traceback(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    bad = write_tenants(
        tmp_path / "typo.yaml",
        {"acme": [repo_entry("widgets", tmp_path / "a", parser_id="neo-cod")]},
    )
    done = _run(["sweep"], {**cli_env, "NEO_TENANTS_FILE": str(bad)})
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    for named in (str(bad), "'acme'", "'widgets'", "parser.id", "neo-cod", "neo-code"):
        assert named in done.stderr, named
    assert not (Path(cli_env["NEO_HOME"]) / "chroma").exists()  # refused before anything ran


@pytest.mark.parametrize(
    "command", [["sweep"], ["canary"], ["query", "widgets", "--tenant", "acme"]]
)
def test_a_provider_without_its_url_is_a_usage_error_for_every_command(
    cli_env: dict[str, str], command: list[str]
) -> None:
    # Before: canary and query printed a raw traceback, sweep recorded a STORE_FAILED run.
    env = {**cli_env, "NEO_EMBEDDING_PROVIDER": "openai_compatible", "NEO_EMBEDDING_MODEL": "m"}
    done = _run([*command, "--json"], env)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    doc = json.loads(done.stdout)
    assert doc["code"] == "CONFIG_INVALID" and "NEO_EMBEDDING_BASE_URL must be set" in doc["error"]
    status = json.loads(_run(["status", "--json"], cli_env).stdout)
    assert {r["outcome"] for r in status["repos"]} == {None}, "nothing was run or recorded"


@pytest.mark.parametrize(
    ("variable", "address", "named"),
    [
        (
            "NEO_LEDGER_URL",
            "postgresql+psycopg://neo:s3cret@127.0.0.1:{port}/kb",
            "ledger's database",
        ),
        ("NEO_CHROMA_URL", "http://127.0.0.1:{port}", "Chroma server"),
    ],
)
def test_an_unreachable_store_is_one_line_naming_its_setting(
    cli_env: dict[str, str], variable: str, address: str, named: str
) -> None:
    # A loopback port nothing listens on (bound, then closed). Before: a raw traceback.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**cli_env, variable: address.format(port=port)}
    for command in (["status", "--json"], ["query", "widgets", "--tenant", "acme", "--json"]):
        done = _run(command, env)
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert "Traceback" not in done.stderr and "s3cret" not in done.stdout + done.stderr
        doc = json.loads(done.stdout)
        assert doc["code"] == "STORE_FAILED"
        assert named in doc["error"] and f"({variable})" in doc["error"]
