"""Failures stay in their tenant (issue 33): a tenants file with a misdeclared entry, or
one that cannot be read at all, as a user meets it: `neo-assets` in a subprocess.

A misdeclared repo or tenant keeps its last good declaration in force (the ledger's),
every other tenant sweeps, answers queries and reconciles as usual, the bad entry is in
`status` with its line and fix, and nothing is retired or reclaimed because of it."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "neo_assets.cli"]


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        CLI + args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def _json(done: subprocess.CompletedProcess) -> dict[str, Any]:
    return json.loads(done.stdout)


def _repo(root: Path, name: str, text: str) -> GitRepo:
    repo = GitRepo(root / name)
    repo.write(f"{name}.py", text)
    repo.commit(name, when=1_700_000_000)
    return repo


def _line_of(text: str, needle: str, after: str = "") -> int:
    """The 1-based line of ``needle``'s first occurrence after ``after``'s."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if after in line) if after else 0
    return next(i for i, line in enumerate(lines) if i >= start and needle in line) + 1


def _rows(env: dict[str, str]) -> dict[tuple[str, str], int]:
    done = _run(["status", "--json"], env)
    assert done.returncode == 0, done.stderr
    return {(r["tenantId"], r["repoSlug"]): r["rows"] for r in _json(done)["repos"]}


@pytest.fixture
def swept(tmp_path: Path) -> tuple[dict[str, str], Path, dict[str, GitRepo]]:
    """Five tenants, six repos, swept once from a good file (their last good
    declarations are recorded)."""
    repos = {
        "widgets": _repo(tmp_path, "widgets", "def render_widget(w):\n    return w.draw()\n"),
        "gadgets": _repo(tmp_path, "gadgets", "def gadget_spin(g):\n    return g.spin()\n"),
        "tools": _repo(tmp_path, "tools", "def hammer_nail(nail):\n    return nail.hit()\n"),
        "lib": _repo(tmp_path, "lib", "def parse_config(text):\n    return text.split()\n"),
        "corp": _repo(tmp_path, "corp", "def umbrella_open(u):\n    return u.open()\n"),
        "app": _repo(tmp_path, "app", "def pied_piper(data):\n    return data.compress()\n"),
    }
    tenants = write_tenants(
        tmp_path / "tenants.yaml",
        {
            "acme": [
                repo_entry("widgets", repos["widgets"].path),
                repo_entry("gadgets", repos["gadgets"].path),
            ],
            "globex": [repo_entry("tools", repos["tools"].path, ref="main")],
            "initech": [repo_entry("lib", repos["lib"].path)],
            "umbrella": [repo_entry("corp", repos["corp"].path)],
            "hooli": [repo_entry("app", repos["app"].path)],
        },
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEO_", "DAGSTER_"))}
    env.update({"NEO_HOME": str(tmp_path / "home"), "NEO_TENANTS_FILE": str(tenants)})
    first = _run(["sweep", "--json"], env)
    assert first.returncode == 0, first.stderr
    assert {r["outcome"] for r in _json(first)["repos"]} == {"complete"}
    return env, tenants, repos


def test_each_misdeclaration_stays_in_its_tenant(
    swept: tuple[dict[str, str], Path, dict[str, GitRepo]], tmp_path: Path
) -> None:
    env, tenants, repos = swept
    before = _rows(env)
    assert all(count > 0 for count in before.values()), before
    # One misdeclaration per tenant, each of a kind, and one untouched tenant (hooli).
    doc = yaml.safe_load(tenants.read_text())
    by_id = {t["id"]: t for t in doc["tenants"]}
    by_id["acme"]["repos"][1]["path"] = str(tmp_path / "gone")  # missing path
    by_id["acme"]["repos"].append(repo_entry("newbie", tmp_path / "never"))  # never good
    by_id["globex"]["repos"][0]["ref"] = "main..oops"  # bad ref
    by_id["initech"]["repos"][0]["parser"]["version"] = "9.9.9"  # unknown parser version
    text = yaml.safe_dump(doc, sort_keys=False)
    # A YAML error confined to umbrella's block: a duplicate key (the rest still parses).
    text = text.replace("- id: umbrella\n", "- id: umbrella\n  id: umbrella-two\n")
    tenants.write_text(text)
    lines = {
        ("acme", "gadgets"): _line_of(text, str(tmp_path / "gone")),
        ("acme", "newbie"): _line_of(text, str(tmp_path / "never")),
        ("globex", "tools"): _line_of(text, "main..oops"),
        ("initech", "lib"): _line_of(text, "9.9.9"),
        ("umbrella", "corp"): _line_of(text, "id: umbrella-two"),
    }

    # A real sweep: every repo in force is swept (the misdeclared ones on their last good
    # declaration); the never-good one is listed, not swept; exit 1 (the file needs a fix).
    done = _run(["sweep", "--force", "--json"], env)
    assert done.returncode == 1, done.stderr
    out = {(r["tenantId"], r["repoSlug"]): r for r in _json(done)["repos"]}
    assert out[("hooli", "app")]["outcome"] == "complete"
    assert out[("hooli", "app")]["misdeclared"] is None
    assert out[("acme", "widgets")]["outcome"] == "complete"
    assert out[("acme", "widgets")]["misdeclared"] is None
    for key in (("acme", "gadgets"), ("globex", "tools"), ("initech", "lib"), ("umbrella", "corp")):
        assert out[key]["outcome"] == "complete", out[key]
        assert out[key]["misdeclared"]["line"] == lines[key], (key, out[key]["misdeclared"])
    assert out[("acme", "newbie")]["outcome"] == "misdeclared"
    assert "repo directory does not exist" in out[("acme", "newbie")]["error"]
    assert "warning:" in done.stderr and "acme/gadgets is misdeclared" in done.stderr

    # status: each bad entry with its line and its fix; the good ones clean.
    status = _run(["status", "--json"], env)
    assert status.returncode == 0, status.stderr
    snap = _json(status)
    rows = {(r["tenantId"], r["repoSlug"]): r for r in snap["repos"]}
    assert snap["declaration"]["source"] == "file"
    assert rows[("hooli", "app")]["misdeclared"] is None
    assert rows[("acme", "widgets")]["misdeclared"] is None
    fixes = {
        ("acme", "gadgets"): "allowed: an existing directory",
        ("acme", "newbie"): "allowed: an existing directory",
        ("globex", "tools"): "it contains '..'",
        ("initech", "lib"): "9.9.9",
        ("umbrella", "corp"): "duplicate key 'id'",
    }
    for key, words in fixes.items():
        entry = rows[key]["misdeclared"]
        assert entry["line"] == lines[key] and words in entry["message"], (key, entry)
        assert rows[key]["state"] == "misdeclared"
    assert rows[("acme", "newbie")]["misdeclared"]["inForce"] == "withheld"
    assert rows[("initech", "lib")]["misdeclared"]["inForce"] == "last-good"
    # Nothing was lost or retired: every repo keeps its rows.
    assert {k: v["rows"] for k, v in rows.items() if k in before} == before
    assert not any(r["retired"] for r in snap["repos"])

    # Queries: the good tenants and the misdeclared ones (their last good declaration).
    for tenant, words, origin in (
        ("hooli", "pied piper compress", "app"),
        ("acme", "render widget", "widgets"),
        ("initech", "parse config text", "lib"),
    ):
        q = _run(["query", words, "--tenant", tenant, "--json"], env)
        assert q.returncode == 0, q.stderr
        results = _json(q)["results"]
        assert results and results[0]["metadata"]["repoSlug"] == origin

    # Reconcile with reclamation on: classifies and reclaims nothing of any of them. Each
    # tenant's `declaration` check names its own entries only: hooli's passes, initech's
    # warns (its last good declaration stands in), acme's errs (newbie stands on
    # nothing), so the reconciliation of everything exits 1 and hooli's alone exits 0.
    renv = {**env, "NEO_RECONCILIATION_ENABLED": "true"}
    rec = _run(["reconcile", "--apply", "--json"], renv)
    assert rec.returncode == 1, rec.stderr
    reports = {t["tenantId"]: t for t in _json(rec)["tenants"]}
    assert {"acme", "globex", "initech", "umbrella", "hooli"} <= set(reports)
    for report in reports.values():
        assert report["success"] and not report["reclaimed"], report
        assert report["orphans"].get("undeclared-repo", {"count": 0})["count"] == 0, report
        assert report["checks"]["no_hole"]["passed"], report["checks"]
    verdicts = {
        t: (r["checks"]["declaration"]["passed"], r["checks"]["declaration"]["severity"])
        for t, r in reports.items()
    }
    assert verdicts["hooli"][0] and verdicts["initech"] == (False, "WARN")
    assert verdicts["acme"] == (False, "ERROR")
    assert reports["initech"]["checks"]["declaration"]["metadata"]["offending"] == [
        f"initech/lib line {lines[('initech', 'lib')]}"
    ]
    alone = _run(["reconcile", "--tenant", "hooli", "--apply", "--json"], renv)
    assert alone.returncode == 0, alone.stderr
    assert _rows(env) == {**before, ("acme", "newbie"): 0}


def test_an_unparsable_file_keeps_every_last_good_declaration(
    swept: tuple[dict[str, str], Path, dict[str, GitRepo]],
) -> None:
    env, tenants, repos = swept
    before = _rows(env)
    tenants.write_text("tenants: [\n  {id: acme\n")  # not YAML at all

    done = _run(["sweep", "--force", "--json"], env)
    assert done.returncode == 1, done.stderr  # swept, but the file needs a fix
    doc = _json(done)
    assert doc["declaration"]["source"] == "last-good"
    assert {r["outcome"] for r in doc["repos"]} == {"complete"}
    assert len(doc["repos"]) == len(before)
    assert "last good declaration of every tenant stays in force" in done.stderr

    status = _run(["status", "--json"], env)
    assert status.returncode == 0, status.stderr
    snap = _json(status)
    assert snap["declaration"]["source"] == "last-good"
    assert "invalid YAML" in snap["declaration"]["problems"][0]["message"]
    assert "warning:" in status.stderr and "invalid YAML" in status.stderr
    assert not any(r["retired"] for r in snap["repos"])

    q = _run(["query", "hammer nail", "--tenant", "globex", "--json"], env)
    assert q.returncode == 0, q.stderr
    assert _json(q)["results"][0]["metadata"]["repoSlug"] == "tools"

    renv = {**env, "NEO_RECONCILIATION_ENABLED": "true"}
    rec = _run(["reconcile", "--apply", "--json"], renv)
    assert rec.returncode == 0, rec.stderr
    assert not any(t["reclaimed"] for t in _json(rec)["tenants"])
    assert _rows(env) == before


def test_a_file_never_good_is_still_refused(tmp_path: Path) -> None:
    bad = tmp_path / "tenants.yaml"
    bad.write_text("tenants: [\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEO_", "DAGSTER_"))}
    env.update({"NEO_HOME": str(tmp_path / "home"), "NEO_TENANTS_FILE": str(bad)})
    done = _run(["status", "--json"], env)
    assert done.returncode == 2
    assert _json(done)["code"] == "CONFIG_INVALID" and "invalid YAML" in done.stderr


def test_a_tenant_never_good_is_withheld_and_the_others_run(tmp_path: Path) -> None:
    widgets = _repo(tmp_path, "widgets", "def render_widget(w):\n    return w.draw()\n")
    tools = _repo(tmp_path, "tools", "def hammer_nail(nail):\n    return nail.hit()\n")
    tenants = tmp_path / "tenants.yaml"
    tenants.write_text(
        "tenants:\n"
        "  - id: acme\n    repos:\n"
        f"      - slug: widgets\n        path: {widgets.path}\n"
        "        parser: {id: neo-code, version: 1.0.0}\n"
        "  - id: globex\n    repo:\n"  # 'repo' for 'repos': a tenant-level problem
        f"      - slug: tools\n        path: {tools.path}\n"
        "        parser: {id: neo-code, version: 1.0.0}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEO_", "DAGSTER_"))}
    env.update({"NEO_HOME": str(tmp_path / "home"), "NEO_TENANTS_FILE": str(tenants)})

    done = _run(["sweep", "--json"], env)
    assert done.returncode == 1, done.stderr
    out = {(r["tenantId"], r["repoSlug"]): r for r in _json(done)["repos"]}
    assert out[("acme", "widgets")]["outcome"] == "complete"
    globex = out[("globex", None)]
    assert globex["outcome"] == "misdeclared" and globex["misdeclared"]["line"] == 8
    assert "did you mean 'repos'" in globex["error"]

    for command in (["query", "hammer", "--tenant", "globex"], ["reconcile", "--tenant", "globex"]):
        refused = _run([*command, "--json"], env)
        assert refused.returncode == 2, refused.stderr
        assert "misdeclared" in _json(refused)["error"]
    q = _run(["query", "render widget", "--tenant", "acme", "--json"], env)
    assert q.returncode == 0 and _json(q)["results"], q.stderr
