"""A repo declared with parser 2.x whose grammar package is missing fails its sweep at
the start, with the message naming the package to install and the code PARSE_FAILED;
never a traceback, never a half-written generation. 1.x repos need no grammar.

The grammar is made missing for real: a ``sitecustomize`` on the CLI's PYTHONPATH sets
``sys.modules["tree_sitter_go"] = None``, so ``import tree_sitter_go`` raises ImportError
in that process as it would without the package."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neo_assets.core import codes
from neo_assets.sources.parsers import grammars
from neo_assets.sweep.context import RepoContext, check_parser
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

ROOT = Path(__file__).resolve().parent.parent


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neo_assets.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_missing_grammar_fails_the_2x_sweep_up_front_with_the_package_to_install(
    neo_home: Path, tmp_path: Path
) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.write("main.go", "package main\n\nfunc main() {}\n")
    repo.write("notes.md", "# Notes\n\ntext\n")
    repo.commit("one", when=1_700_000_000)
    tenants = write_tenants(
        tmp_path / "tenants.yaml",
        {
            "acme": [
                repo_entry("v2", repo.path, version="2.0.0"),
                repo_entry("v1", repo.path, version="1.0.0"),
            ]
        },
    )
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\nsys.modules['tree_sitter_go'] = None\n", encoding="utf-8"
    )
    env = dict(os.environ)
    env["NEO_TENANTS_FILE"] = str(tenants)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", ""), str(ROOT)])
    done = _cli(["sweep", "--force", "--json"], env)
    assert done.returncode == 1, done.stderr[-3000:]
    by_slug = {r["repoSlug"]: r for r in json.loads(done.stdout)["repos"]}
    failed = by_slug["v2"]
    assert failed["outcome"] == "failed"
    assert failed["deferredCauseCode"] == codes.PARSE_FAILED
    assert "pip install tree-sitter-go" in failed["error"]
    assert "acme/v2" in failed["error"]
    assert "Traceback" not in failed["error"]
    # The 1.x repo needs no grammar: it sweeps as before.
    assert by_slug["v1"]["outcome"] == "complete"

    # Nothing of the 2.x repo was written: the check ran before its envelope.
    status = _cli(["status", "--json"], env)
    rows = {r["repoSlug"]: r for r in json.loads(status.stdout)["repos"]}
    assert rows["v2"]["outcome"] == "failed"
    assert rows["v2"]["deferredCauseCode"] == codes.PARSE_FAILED
    assert rows["v2"]["lastIngestedRev"] is None

    # With the grammar back, the same declaration sweeps.
    env["PYTHONPATH"] = os.pathsep.join([os.environ.get("PYTHONPATH", ""), str(ROOT)])
    again = _cli(["sweep", "--force", "--json", "--repo", "v2"], env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["repos"][0]["outcome"] == "complete"


def _ctx(tmp_path: Path, version: str) -> RepoContext:
    from neo_assets.tenants.validation import load_tenants

    path = write_tenants(
        tmp_path / "t.yaml", {"acme": [repo_entry("w", tmp_path, version=version)]}
    )
    t = load_tenants(path).tenants[0]
    return RepoContext(tenant=t, repo=t.repos[0])


def test_the_check_raises_parse_failed_naming_repo_and_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grammars.language_for.cache_clear()
    monkeypatch.setitem(sys.modules, "tree_sitter_rust", None)
    try:
        with pytest.raises(Exception, match="pip install tree-sitter-rust") as raised:
            check_parser(_ctx(tmp_path, "2.0.0"))
        assert raised.value.code == codes.PARSE_FAILED
        assert "acme/w" in str(raised.value)
        check_parser(_ctx(tmp_path, "1.0.0"))  # 1.x loads no grammar
    finally:
        grammars.language_for.cache_clear()
