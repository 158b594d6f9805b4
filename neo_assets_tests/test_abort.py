"""An upstream abort (Ctrl-C in the CLI; a Dagster run terminated from the UI delivers the
same interrupt to the step) stops the lane at once and is recorded as what it is."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import sqlalchemy as sa

from neo_assets.core import codes
from neo_assets.store.ledger import Ledger
from neo_assets_tests.fakes.fixtures import fault_server_fixture
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.sweep_harness import DIMENSIONS, sweep_env_vars
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

ROOT = Path(__file__).resolve().parents[1]
fault_server = fault_server_fixture(dimensions=DIMENSIONS)


def test_ctrl_c_mid_embedding_defers_as_aborted_and_the_next_sweep_completes(
    tmp_path: Path,
    fault_server,  # noqa: F811
) -> None:
    repo = GitRepo(tmp_path / "r")
    for i in range(40):
        repo.write(f"f{i:02d}.txt", f"healthy chunk number {i}\n")
    repo.commit("many", when=1_700_000_000)
    tenants = write_tenants(tmp_path / "t.yaml", {"acme": [repo_entry("w", repo.path)]})
    fault_server.configure(latency_s=0.4)  # 10 batches of 4: ~4 s of embedding
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEO_", "DAGSTER_"))}
    env.update(sweep_env_vars(fault_server))
    env.update({"NEO_HOME": str(tmp_path / "home"), "NEO_TENANTS_FILE": str(tenants)})
    proc = subprocess.Popen(
        [sys.executable, "-m", "neo_assets.cli", "sweep", "--json"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Wait until embedding is under way (the server has received requests), then Ctrl-C.
    deadline = time.monotonic() + 120
    while fault_server.stats()["requests_received"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    before = fault_server.stats()["requests_received"]
    assert before > 0
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    after = fault_server.stats()["requests_received"]
    assert after - before <= 2  # at most what was already in flight: nothing new started

    ledger = Ledger.open(f"sqlite:///{tmp_path / 'home' / 'ledger.sqlite'}")
    row = ledger.repo_state("acme", "w")
    assert row is not None
    assert row["last_outcome"] == codes.OUTCOME_DEFERRED
    assert row["deferred_cause_code"] == codes.KB_VECTOR_EMBED_ABORTED
    assert row["last_ingested_rev"] is None  # the checkpoint did not move
    with ledger.engine.connect() as conn:
        assert conn.execute(sa.text("select count(*) from fences")).scalar() == 0

    fault_server.configure(latency_s=0.0)
    done = subprocess.run(
        [sys.executable, "-m", "neo_assets.cli", "sweep", "--force", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    second = json.loads(done.stdout)["repos"][0]
    assert second["outcome"] == codes.OUTCOME_COMPLETE, second
