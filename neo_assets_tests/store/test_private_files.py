"""Data at rest (issue 36 item 5): on a fresh NEO_HOME, everything the project creates is
its owner's only: NEO_HOME and every folder in it 0700, every file 0600 (the ledger with
its token hashes, Chroma's files with every chunk's text, Dagster's storage and logs, the
local server's state), whichever command made it."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from neo_assets.store.local_server import ServerPaths, stop_local_server
from neo_assets.store.private_files import private_dir, private_file
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

ROOT = Path(__file__).resolve().parents[2]


def _open_to_others(home: Path) -> list[str]:
    found = []
    for path in [home, *home.rglob("*")]:
        if path.is_symlink():
            continue
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & 0o077:
            found.append(f"{oct(mode)} {path.relative_to(home.parent)}")
    return found


@pytest.mark.parametrize("store", ["server", "embedded"])
def test_a_fresh_home_is_its_owners_only(tmp_path: Path, store: str) -> None:
    if os.name != "posix":
        pytest.skip("POSIX file modes")
    repo = GitRepo(tmp_path / "repo")
    repo.write("a.py", "def answer(x):\n    return x\n")
    repo.commit("one", when=1_700_000_000)
    tenants = write_tenants(tmp_path / "tenants.yaml", {"t": [repo_entry("r", repo.path)]})
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEO_", "DAGSTER_"))}
    env |= {"NEO_HOME": str(home), "NEO_TENANTS_FILE": str(tenants), "NEO_CHROMA_LOCAL": store}
    # A user's shell with the usual umask: the project narrows it itself.
    run = ["sh", "-c", 'umask 022; exec "$@"', "sh", sys.executable, "-m"]
    try:
        for args in (
            ["neo_assets.config.examples"],
            ["neo_assets.cli", "sweep", "--json"],
            ["neo_assets.cli", "token", "issue", "--tenant", "t", "--json"],
            ["neo_assets.cli", "query", "answer", "--tenant", "t", "--json"],
        ):
            done = subprocess.run(
                run + args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
            )
            assert done.returncode == 0, (args, done.stderr[-2000:])
        assert json.loads(done.stdout)["results"]
        assert (home / "ledger.sqlite").exists() and (home / "chroma").is_dir()
        assert (home / "dagster").is_dir()
        assert _open_to_others(home) == []
    finally:
        stop_local_server(ServerPaths.under(home, home / "chroma"))


def test_an_existing_home_of_ours_is_narrowed_and_a_file_too(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    ledger = home / "ledger.sqlite"
    ledger.write_text("")
    ledger.chmod(0o644)
    private_dir(home)
    private_file(ledger)
    private_file(home / "absent")  # nothing to do, no error
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE(ledger.stat().st_mode) == 0o600
