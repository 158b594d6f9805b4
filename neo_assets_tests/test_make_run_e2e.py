"""`make run` and `make dev` follow NEO_HOME (and DAGSTER_HOME), on a fresh clone.

The clone is a ``git clone`` of this checkout with its uncommitted changes to tracked
files applied: what the next commit would hold, and nothing untracked (no .venv, no
.neo). ``make run`` is the clone's real target, run with this test's environment
(``VENV=<it> SKIP_INSTALL=1``: creating a venv and installing takes minutes and would
re-point that environment's editable install) and ``PYTHONPATH=<clone>``, so the
clone's code and example tenants are what run. It sweeps the clone itself (the neo-self
tenant) with the hashing embedder: some seconds.
"""

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from neo_assets.store.local_server import ServerPaths, stop_local_server
from neo_assets_tests.gitrepo import GitRepo, git_env

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(sys.prefix)

pytestmark = pytest.mark.skipif(
    shutil.which("make") is None
    or shutil.which("git") is None
    or not (ROOT / ".git").exists()
    or not (VENV / "bin" / "neo-assets").exists(),
    reason="needs make, git, a git checkout and the neo-assets script in this environment",
)


def _env(**extra: str) -> dict[str, str]:
    """A user's shell: none of this process's NEO_* / DAGSTER_HOME / make state."""
    env = {
        k: v
        for k, v in git_env().items()
        if not k.startswith(("NEO_", "MAKE"))
        and k not in {"DAGSTER_HOME", "PYTHONPATH", "MFLAGS", "VENV", "SKIP_INSTALL"}
    }
    env.update(extra)
    return env


def _git(*args: str, cwd: Path, stdin: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=git_env(), input=stdin, capture_output=True, check=True
    ).stdout


@pytest.fixture(autouse=True)
def stop_local_store(tmp_path: Path) -> Iterator[None]:
    """``make run`` starts the local Chroma server under its NEO_HOME: stopped after."""
    yield
    home = tmp_path / "elsewhere" / "neo"
    stop_local_server(ServerPaths.under(home, home / "chroma"))


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    target = tmp_path / "clone"
    _git("clone", "-q", str(ROOT), str(target), cwd=tmp_path)
    changes = _git("diff", "HEAD", "--binary", cwd=ROOT)
    if changes:
        _git("apply", "--whitespace=nowarn", cwd=target, stdin=changes)
    return target


def _make_run(clone: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "run", f"VENV={VENV}", "SKIP_INSTALL=1"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )


def _status(clone: Path, env: dict[str, str]) -> dict[tuple[str, str], dict]:
    done = subprocess.run(
        [str(VENV / "bin" / "neo-assets"), "status", "--json"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {(r["tenantId"], r["repoSlug"]): r for r in json.loads(done.stdout)["repos"]}


def _head(repo: Path) -> str:
    return _git("rev-parse", "HEAD", cwd=repo).decode().strip()


def test_make_run_on_a_fresh_clone_sweeps_the_sample_under_neo_home(
    clone: Path, tmp_path: Path
) -> None:
    home = tmp_path / "elsewhere" / "neo"
    env = _env(NEO_HOME=str(home), PYTHONPATH=str(clone))
    done = _make_run(clone, env)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]

    sample = home / "examples" / "sample-widgets"
    assert f"sample repository ready: {sample}" in output
    repos = _status(clone, env)
    widgets = repos[("acme", "widgets")]
    assert widgets["outcome"] == "complete" and widgets["rows"] > 0
    assert widgets["lastIngestedRev"] == _head(sample)  # the repo made under NEO_HOME
    itself = repos[("neo-self", "neo-assets")]
    assert itself["outcome"] == "complete"
    assert itself["lastIngestedRev"] == _head(clone)  # the clone's own code ran

    # Everything lives under NEO_HOME, and the printed hint opens that instance.
    assert (home / "ledger.sqlite").exists() and (home / "dagster" / "dagster.yaml").exists()
    assert not (clone / ".neo").exists()
    assert f"NEO_HOME='{home}' DAGSTER_HOME='{home}/dagster' " in done.stdout


def test_make_run_ignores_a_stale_dot_neo_when_neo_home_is_elsewhere(
    clone: Path, tmp_path: Path
) -> None:
    stale = GitRepo(clone / ".neo" / "examples" / "sample-widgets")
    stale.write("STALE.md", "# From another home\n")
    stale.commit("an old sample", when=1_600_000_000)
    home = tmp_path / "elsewhere" / "neo"
    dagster_home = tmp_path / "dagster-instance"
    env = _env(NEO_HOME=str(home), DAGSTER_HOME=str(dagster_home), PYTHONPATH=str(clone))
    done = _make_run(clone, env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]

    widgets = _status(clone, env)[("acme", "widgets")]
    assert widgets["outcome"] == "complete"
    assert widgets["lastIngestedRev"] == _head(home / "examples" / "sample-widgets")
    assert widgets["lastIngestedRev"] != _head(stale.path)
    assert sorted(p.name for p in (clone / ".neo").iterdir()) == ["examples"]  # untouched
    assert (dagster_home / "dagster.yaml").exists()
    assert f"DAGSTER_HOME='{dagster_home}' " in done.stdout


def _make_n(target: str, env: dict[str, str], *assignments: str) -> str:
    done = subprocess.run(
        ["make", "-n", target, f"VENV={VENV}", "SKIP_INSTALL=1", *assignments],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _ui_command(neo_home: str, dagster_home: str, port: int = 3000) -> str:
    return (
        f"NEO_HOME='{neo_home}' DAGSTER_HOME='{dagster_home}' "
        f"NEO_UI_BASE_URL='http://127.0.0.1:{port}' "
        f"{VENV}/bin/dagster dev -m neo_assets.definitions -p {port}"
    )


@pytest.mark.parametrize(
    ("variables", "neo_home", "dagster_home"),
    [
        ({}, "<root>/.neo", "<root>/.neo/dagster"),
        ({"NEO_HOME": "/srv/neo"}, "/srv/neo", "/srv/neo/dagster"),
        ({"NEO_HOME": "data/neo"}, "<root>/data/neo", "<root>/data/neo/dagster"),
        ({"NEO_HOME": "./data"}, "<root>/data", "<root>/data/dagster"),
        ({"NEO_HOME": "~/neo"}, "<home>/neo", "<home>/neo/dagster"),
        ({"NEO_HOME": "/srv/my neo"}, "/srv/my neo", "/srv/my neo/dagster"),
        ({"DAGSTER_HOME": "/srv/dagster"}, "<root>/.neo", "/srv/dagster"),
        ({"NEO_HOME": "/srv/neo", "DAGSTER_HOME": "d"}, "/srv/neo", "<root>/d"),
    ],
)
@pytest.mark.parametrize("target", ["dev", "run"])
def test_make_dev_and_the_run_hint_name_the_homes_the_cli_uses(
    variables: dict[str, str], neo_home: str, dagster_home: str, target: str
) -> None:
    # The CLI's rule (Settings.home_dir, dagster_instance in neo_assets/cli/launch.py):
    # DAGSTER_HOME, else $NEO_HOME/dagster, NEO_HOME defaulting to .neo; relative ones
    # against the current directory. ~ as a quoted shell would leave it.
    def expected(path: str) -> str:
        return path.replace("<root>", str(ROOT)).replace("<home>", os.environ["HOME"])

    printed = _make_n(target, _env(**variables))
    assert _ui_command(expected(neo_home), expected(dagster_home)) in printed


@pytest.mark.parametrize("target", ["dev", "run"])
def test_homes_given_on_the_make_command_line_count_too(target: str) -> None:
    printed = _make_n(target, _env(NEO_HOME="/ignored"), "NEO_HOME=/srv/neo", "DAGSTER_HOME=/d")
    assert _ui_command("/srv/neo", "/d") in printed


@pytest.mark.parametrize("target", ["dev", "run"])
def test_make_dev_on_another_port_links_alerts_there(target: str) -> None:
    printed = _make_n(target, _env(NEO_HOME="/srv/neo"), "UI_PORT=3111")
    assert _ui_command("/srv/neo", "/srv/neo/dagster", port=3111) in printed
    # An explicit NEO_UI_BASE_URL (a proxy in front of the UI) wins over the port.
    proxied = _make_n(target, _env(NEO_HOME="/srv/neo", NEO_UI_BASE_URL="https://ops.example"))
    assert "NEO_UI_BASE_URL='https://ops.example'" in proxied
