"""A provider that is not there is named at once (issue 37 item 3): a refusing port past
a short wait, a host that does not resolve, a URL that answers 404. The sweep ends in
seconds, defers with KB_VECTOR_EMBED_PROVIDER_UNREACHABLE (never a content verdict), the
CLI exits 1 naming the URL, the setting and the fix, and status says the same. A server
that opens its port within the wait is used as if it had been there."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from neo_assets.core import codes
from neo_assets.embedding.rules.lane_evidence import first_contact
from neo_assets.embedding.rules.provider_kinds import (
    UNREACHABLE_REFUSED,
    UNREACHABLE_UNRESOLVED,
    UNREACHABLE_WRONG_PATH,
    unreachable_message,
)
from neo_assets_tests.fakes.fixtures import fault_server
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.servers import free_port
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

ROOT = Path(__file__).resolve().parents[2]
__all__ = ["fault_server"]


# ---------------------------------------------------------------------------- the rules
def test_first_contact_tells_a_missing_provider_from_a_passing_failure() -> None:
    refused = codes.KB_VECTOR_EMBED_CONNECTION_REFUSED
    assert first_contact(refused, None, True) == UNREACHABLE_REFUSED
    assert first_contact(codes.KB_VECTOR_EMBED_UNCLASSIFIED, None, True) == UNREACHABLE_UNRESOLVED
    assert first_contact(codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL, 404, False) == (
        UNREACHABLE_WRONG_PATH
    )
    # What says nothing about the provider being there.
    assert first_contact(codes.KB_VECTOR_EMBED_UNCLASSIFIED, None, False) is None
    assert first_contact(codes.KB_VECTOR_EMBED_TIMEOUT, None, False) is None
    assert first_contact(codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL, 400, False) is None
    assert first_contact(codes.KB_VECTOR_EMBED_PROVIDER_LOADING, 503, False) is None


def test_the_message_names_the_url_the_setting_and_the_fix() -> None:
    refused = unreachable_message("ollama", "http://127.0.0.1:11434", UNREACHABLE_REFUSED, 8.2)
    assert "http://127.0.0.1:11434" in refused and "NEO_EMBEDDING_BASE_URL" in refused
    assert "ollama serve" in refused and "waited 8 s" in refused
    wrong = unreachable_message("openai_compatible", "http://h:8080/v1", UNREACHABLE_WRONG_PATH, 0)
    assert "404" in wrong and "without the API path" in wrong
    dns = unreachable_message("ollama", "http://nohost.invalid", UNREACHABLE_UNRESOLVED, 0)
    assert "does not resolve" in dns and "nohost.invalid" in dns


# ---------------------------------------------------------------------------- the CLI
@pytest.fixture
def one_repo(neo_home: Path, tmp_path: Path) -> dict[str, str]:
    repo = GitRepo(tmp_path / "repo")
    repo.write("a.py", "def answer(x):\n    return x\n")
    repo.commit("one", when=1_700_000_000)
    tenants = write_tenants(tmp_path / "tenants.yaml", {"t": [repo_entry("r", repo.path)]})
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEO_")}
    return env | {
        "NEO_HOME": str(neo_home),
        "DAGSTER_HOME": str(neo_home / "dagster"),
        "NEO_TENANTS_FILE": str(tenants),
        "NEO_CHROMA_LOCAL": "embedded",
        "NEO_EMBEDDING_RECOVERY_INITIAL_S": "0.2",
        "NEO_EMBEDDING_RECOVERY_MAX_S": "1",
    }


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neo_assets.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.parametrize("kind", ["ollama", "openai_compatible"])
def test_nothing_listening_ends_the_sweep_in_seconds_naming_it(
    one_repo: dict[str, str], kind: str
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    env = one_repo | {
        "NEO_EMBEDDING_PROVIDER": kind,
        "NEO_EMBEDDING_BASE_URL": url,
        "NEO_EMBEDDING_MODEL": "nomic-embed-text",
        # The product waits 15 s for a server that may be starting (the last test here
        # runs on that default); this one needs only that the wait ends and names it.
        "NEO_EMBEDDING_UNREACHABLE_WAIT_S": "2",
    }
    started = time.monotonic()
    done = _cli(env, "sweep", "--json")
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr[-2000:]
    assert took <= 30, took  # the wait for a server that may be starting, then named
    repo = json.loads(done.stdout)["repos"][0]
    assert repo["outcome"] == codes.OUTCOME_DEFERRED
    assert repo["deferredCauseCode"] == codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE
    assert url in repo["error"] and "NEO_EMBEDDING_BASE_URL" in repo["error"]
    assert repo["contentPoisonChunks"]["count"] == 0 and repo["strikes"] == []
    if kind == "ollama":
        assert "ollama serve" in repo["error"]
    status = _cli(env, "status")
    assert status.returncode == 0
    assert url in status.stderr and "Traceback" not in status.stderr


def test_a_host_that_does_not_resolve_is_named_at_once(one_repo: dict[str, str]) -> None:
    env = one_repo | {
        "NEO_EMBEDDING_PROVIDER": "ollama",
        "NEO_EMBEDDING_BASE_URL": "http://no-such-embedding-host.invalid:11434",
        "NEO_EMBEDDING_MODEL": "nomic-embed-text",
    }
    started = time.monotonic()
    done = _cli(env, "sweep", "--json")
    assert done.returncode == 1 and time.monotonic() - started <= 30
    repo = json.loads(done.stdout)["repos"][0]
    assert repo["deferredCauseCode"] == codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE
    assert "no-such-embedding-host.invalid" in repo["error"]
    assert repo["timings"]["embedSeconds"] < 5  # no waiting: a name does not heal


def test_a_url_that_answers_404_names_the_path(one_repo: dict[str, str], fault_server) -> None:
    wrong = f"{fault_server.base_url}/v1"  # the API path given twice: /v1/v1/embeddings
    env = one_repo | {
        "NEO_EMBEDDING_PROVIDER": "openai_compatible",
        "NEO_EMBEDDING_BASE_URL": wrong,
        "NEO_EMBEDDING_MODEL": "fake-embed",
        "NEO_EMBEDDING_DIMENSIONS": str(fault_server.dimensions),
    }
    done = _cli(env, "sweep", "--json")
    assert done.returncode == 1, done.stderr[-2000:]
    repo = json.loads(done.stdout)["repos"][0]
    assert repo["deferredCauseCode"] == codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE
    assert "404" in repo["error"] and wrong in repo["error"]
    assert repo["contentPoisonChunks"]["count"] == 0 and repo["undeliverableChunks"]["count"] == 0


def test_a_server_that_opens_its_port_within_the_wait_is_used(
    one_repo: dict[str, str], fault_server
) -> None:
    fault_server.refuse()
    env = one_repo | {
        "NEO_EMBEDDING_PROVIDER": "openai_compatible",
        "NEO_EMBEDDING_BASE_URL": fault_server.base_url,
        "NEO_EMBEDDING_MODEL": "fake-embed",
        "NEO_EMBEDDING_DIMENSIONS": str(fault_server.dimensions),
    }
    opener = threading.Timer(3.0, fault_server.resume)
    opener.start()
    try:
        done = _cli(env, "sweep", "--json")
    finally:
        opener.cancel()
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["repos"][0]["outcome"] == codes.OUTCOME_COMPLETE
