"""Secrets never leave the repo (issue 36), end to end: a real git repo with planted
secrets of each kind, swept through Dagster against the fault server recording every
request body, into the real Chroma under NEO_HOME.

No secret in any Chroma row (documents or metadata) nor in any provider request; each
secret file skipped by the envelope, each chunk holding one fenced ``secret``, counted in
the census and shown in ``status`` with its path and line (never the secret); the file
changed to remove the secret is embedded and served."""

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from neo_assets.core import codes
from neo_assets_tests.fakes.fixtures import fault_server_fixture
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor
from neo_assets_tests.secrets import planted as p
from neo_assets_tests.sweep_harness import DIMENSIONS, ROOT, TENANT, SweepEnv

server_module = fault_server_fixture(scope="module", dimensions=DIMENSIONS)

SECRETS = [
    p.DATABASE_URL,
    p.DB_PASSWORD,
    p.STRIPE_LIVE,
    p.RSA_BODY.splitlines()[0],
    p.AWS_KEY_ID,
    p.AWS_SECRET,
    p.GITHUB_TOKEN,
    p.PASSWORD_VALUE,
]
DOTENV = f"DATABASE_URL={p.DATABASE_URL}\nSTRIPE_KEY={p.STRIPE_LIVE}\nDEBUG=0\n"
FILES = {
    # secret files: never read (the default secret-file globs)
    ".env": DOTENV,
    "deploy/id_rsa": p.PRIVATE_KEY,
    # chunks holding a secret: read, scanned, fenced
    "deploy/settings.ini": "[app]\nname = shop\n" + DOTENV,  # lines 3 and 4
    "keys.py": f'"""Keys."""\n\nSIGNING_KEY = """{p.PRIVATE_KEY}"""\n',  # line 3
    "aws.py": f'REGION = "eu-west-1"\nAWS_ACCESS_KEY_ID = "{p.AWS_KEY_ID}"\n'
    f'aws_secret_access_key = "{p.AWS_SECRET}"\n',  # lines 2 and 3
    "ci.yaml": f"jobs:\n  build:\n    env:\n      GH_TOKEN: {p.GITHUB_TOKEN}\n",  # line 4
    "conf.py": f'HOST = "db.internal"\nPASSWORD = "{p.PASSWORD_VALUE}"\n',  # line 2
    # clean
    "app.py": "def handler(request):\n    return render_inventory(request.user)\n",
}
EXPECTED = {
    ("deploy/settings.ini", 3, "url-credentials"),
    ("deploy/settings.ini", 4, "stripe-live-key"),
    ("keys.py", 3, "private-key-block"),
    ("aws.py", 2, "aws-access-key-id"),
    ("aws.py", 3, "aws-secret-access-key"),
    ("aws.py", 3, "secret-assignment"),  # the same line, by two rules
    ("ci.yaml", 4, "github-token"),
    ("ci.yaml", 4, "secret-assignment"),
    ("conf.py", 2, "secret-assignment"),
}


@pytest.fixture
def server(server_module: FaultServerSupervisor) -> Iterator[FaultServerSupervisor]:
    server_module.reset()
    server_module.configure(record_bodies=True)
    yield server_module
    server_module.reset()


@pytest.fixture
def env(
    neo_home: Path, tmp_path: Path, server: FaultServerSupervisor, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SweepEnv]:
    made = SweepEnv.create(tmp_path, server, FILES)
    for name, value in made.env_vars().items():
        monkeypatch.setenv(name, value)
    yield made
    made.close()


def all_rows(env: SweepEnv) -> list[dict]:
    ids = [r["id"] for r in env.store.tenant_rows(TENANT)]
    return list(env.store.get_rows(ids, include_documents=True).values())


def leaked(env: SweepEnv, server: FaultServerSupervisor) -> list[str]:
    stored = json.dumps(all_rows(env))
    sent = server.bodies().decode("utf-8", "replace")
    return [
        where
        for s in SECRETS
        for where, text in (("chroma", stored), ("provider", sent))
        if s in text or json.dumps(s)[1:-1] in text
    ]


def cli_query(text: str) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-m", "neo_assets.cli", "query", text, "--tenant", TENANT, "-k", "20"]
        + ["--json"],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)["results"]


def test_planted_secrets_never_leave_the_repo(env: SweepEnv, server: FaultServerSupervisor):
    result = env.sweep(force=True)
    assert result["outcome"] == codes.OUTCOME_COMPLETE, result

    # Something was embedded and sent (the clean file), and no secret anywhere.
    assert server.bodies(), "no request recorded"
    assert "render_inventory" in server.bodies().decode()
    assert leaked(env, server) == []
    rows = all_rows(env)
    assert {r["metadata"]["sourcePath"] for r in rows} == {"app.py"}

    # The secret files were never read: the envelope lists them as excluded.
    _, entries = env.ledger.envelope_rows(TENANT, "widgets")
    reasons = {path: reason for path, _size, _blob, yielded, reason, _at in entries}
    assert reasons[".env"] == codes.SKIP_EXCLUDED
    assert reasons["deploy/id_rsa"] == codes.SKIP_EXCLUDED

    # Each chunk holding a secret: counted in the census, shown with path and line.
    secret_files = {path for path, _, _ in EXPECTED}
    fenced = {cid for path in secret_files for cid in env.chunk_ids(path)}
    status = env.cli_status()
    census = status["secretChunks"]
    assert census["count"] == len(fenced) and set(census["ids"]) == fenced
    shown = {(e["path"], e["line"], e["rule"]) for e in census["locations"]}
    assert shown == EXPECTED
    assert not any(s in json.dumps(status) for s in SECRETS)
    assert result["secretChunks"]["count"] == len(fenced)
    assert result["counts"]["fencedSecret"] == len(fenced)

    # A second sweep: still fenced, still complete, nothing sent again.
    requests = server.stats()["requests_received"]
    again = env.sweep(force=True)
    assert again["outcome"] == codes.OUTCOME_COMPLETE
    assert again["secretChunks"]["count"] == len(fenced)
    assert server.stats()["requests_received"] == requests

    # conf.py changed to read its password from the environment: a new chunk id, clean,
    # embedded and served; the other secrets stay fenced.
    env.commit({"conf.py": 'HOST = "db.internal"\nPASSWORD = os.environ["DB_PASSWORD"]\n'})
    fixed = env.sweep()
    assert fixed["outcome"] == codes.OUTCOME_COMPLETE, fixed
    assert fixed["secretChunks"]["count"] == len(fenced) - 1
    assert env.chunk_id("conf.py") in env.store.present_ids(env.chunk_ids("conf.py"))
    served = cli_query("database host password from the environment")
    assert "conf.py" in {r["metadata"]["sourcePath"] for r in served}
    assert not any(s in json.dumps(served) for s in SECRETS)
    assert leaked(env, server) == []
    shown = {
        (e["path"], e["line"], e["rule"]) for e in env.cli_status()["secretChunks"]["locations"]
    }
    assert shown == EXPECTED - {("conf.py", 2, "secret-assignment")}
