"""Self-evaluation over a real git repo: the question set from its history (a vague
subject never becomes a question), and ``evaluate_repo`` / ``neo-assets eval`` through the
query library over a real sweep (default embedder, real Chroma)."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neo_assets.cli.app import app
from neo_assets.config.settings import load_settings
from neo_assets.quality.evaluate import QualityUnavailable, evaluate_repo
from neo_assets.quality.history import build_question_set
from neo_assets.query.search import QueryService
from neo_assets.query.serving import Resident
from neo_assets.services.handles import open_ledger, open_store
from neo_assets.sweep.context import RepoContext
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import sweep_once
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

PARSE = '''def parse_header(line):
    """Split a header line into its name and value."""
    name, _, value = line.partition(":")
    return name.strip(), value.strip()
'''
CACHE = '''def cached_lookup(table, key):
    """Return the cached value of key, computing it once."""
    if key not in table:
        table[key] = len(key)
    return table[key]
'''
RETRY = '''def retry_delay(attempt):
    """Seconds to wait before the next attempt: doubling, at most a minute."""
    return min(60, 2 ** attempt)
'''


def history(tmp_path: Path) -> tuple[GitRepo, dict[str, str]]:
    """A repo whose commits each change one function; some subjects are vague."""
    repo = GitRepo(tmp_path / "r")
    when = 1_700_000_000
    repo.write("pkg/http.py", PARSE + "\n\n" + CACHE + "\n\n" + RETRY)
    repo.write("README.md", "# r\n")
    shas = {"first": repo.commit("initial import of the http helpers", when=when)}
    # A vague subject changing exactly one function: must never become a question.
    repo.write(
        "pkg/http.py", PARSE + "\n\n" + CACHE.replace("once.", "once only.") + "\n\n" + RETRY
    )
    shas["typo"] = repo.commit("fix typo", when=when + 10)
    repo.write(
        "pkg/http.py",
        PARSE
        + "\n\n"
        + CACHE.replace("once.", "once only.")
        + "\n\n"
        + RETRY.replace("min(60", "min(120"),
    )
    shas["bump"] = repo.commit("Bump version to 1.2.0", when=when + 20)
    repo.write(
        "pkg/http.py",
        PARSE.replace("name.strip(), value.strip()", "name.strip().lower(), value.strip()")
        + "\n\n"
        + CACHE.replace("once.", "once only.")
        + "\n\n"
        + RETRY.replace("min(60", "min(120"),
    )
    shas["good"] = repo.commit(
        "lower-case header names when splitting a header line", when=when + 30
    )
    repo.write("tests/test_http.py", "def test_parse():\n    assert True\n")
    shas["tests"] = repo.commit("cover header parsing with a unit check", when=when + 40)
    return repo, shas


def test_a_vague_subject_commit_never_becomes_a_question(tmp_path: Path) -> None:
    repo, shas = history(tmp_path)
    qs = build_question_set(repo.path, repo.head(), "2.0.0")
    assert [(q.commit, q.qualified_name, q.path) for q in qs.questions] == [
        (shas["good"], "pkg.http.parse_header", "pkg/http.py")
    ]
    q = qs.questions[0]
    assert q.text == "lower-case header names when splitting a header line"
    assert q.definition == "def parse_header(line):"
    asked = {q.commit for q in qs.questions}
    assert shas["typo"] not in asked and shas["bump"] not in asked
    assert qs.skipped["vague-typo"] == 1 and qs.skipped["vague-version"] == 1
    # The test-only commit changed no source function; the first touched three.
    assert qs.skipped["no-function"] == 1 and qs.skipped["several-functions"] == 1


def test_a_function_gone_at_the_indexed_revision_is_no_question(tmp_path: Path) -> None:
    repo, shas = history(tmp_path)
    repo.write("pkg/http.py", CACHE + "\n\n" + RETRY)  # parse_header removed
    repo.commit("drop the header parser and its callers entirely", when=1_700_000_100)
    qs = build_question_set(repo.path, repo.head(), "2.0.0")
    assert qs.questions == []
    assert qs.skipped["gone-at-revision"] == 1
    # At the older revision it still exists: the revision decides, not the work tree.
    assert len(build_question_set(repo.path, shas["tests"], "2.0.0").questions) == 1


@pytest.fixture
def swept(neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    repo, _ = history(tmp_path)
    path = write_tenants(
        tmp_path / "t.yaml", {"acme": [repo_entry("web", repo.path, version="2.0.0")]}
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(path))
    tenant = load_tenants(path).tenants[0]
    assert sweep_once(RepoContext(tenant=tenant, repo=tenant.repos[0]))["outcome"] == "complete"
    return repo


def test_evaluate_repo_asks_through_the_query_library(swept: GitRepo) -> None:
    settings = load_settings()
    with open_ledger(settings) as ledger, open_store(settings) as store:
        service = QueryService(Resident(settings, store, ledger))
        report = evaluate_repo(service, "acme", "web")
        with pytest.raises(QualityUnavailable, match="no repo 'nope' declared"):
            evaluate_repo(service, "acme", "nope")
    assert report.revision == swept.head()
    assert report.metrics.questions == 1
    (result,) = report.questions
    assert result.qualifiedName == "pkg.http.parse_header"
    # Three functions in one small repo: the answer is among the ten results.
    assert result.rank is not None and 1 <= result.rank <= 3
    m = report.metrics
    assert m.recall_at_10 == 1.0 and m.mrr_at_10 == pytest.approx(1 / result.rank, 1e-3)
    assert report.embedding_generation


def test_cli_eval_prints_one_json_document(swept: GitRepo) -> None:
    done = CliRunner().invoke(app, ["eval", "--tenant", "acme", "--json"])
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    (repo,) = doc["repos"]
    assert repo["repoSlug"] == "web" and repo["questionCount"] == 1
    assert repo["recallAt10"] == 1.0 and repo["questions"][0]["rank"] >= 1
    bad = CliRunner().invoke(app, ["eval", "--tenant", "ghost"])
    assert bad.exit_code == 2 and "no tenant 'ghost'" in bad.output
