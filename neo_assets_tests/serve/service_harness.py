"""A real knowledge base of two tenants (real git repos, real sweeps through Dagster, the
hashing embedder) and the real query service on loopback: ``neo-assets serve`` in a
subprocess, stopped after.

    kb = ServedKb.build(tmp_dir)          # sweeps acme/widgets, acme/gadgets, globex/vault
    with kb.serve(NEO_SERVE_PER_TOKEN_CONCURRENCY="2") as svc:
        httpx.post(f"{svc.url}/v1/search", ...)
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import httpx

from neo_assets.cli.launch import run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.store.local_server import ServerPaths, stop_local_server
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.servers import LOOPBACK, free_port
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

ROOT = Path(__file__).resolve().parents[2]

REPOS = {
    ("acme", "widgets"): {
        "widgets/dispatch.py": (
            "def dispatch_request(request):\n"
            '    """Route a request to its handler."""\n'
            "    return HANDLERS[request.path](request)\n\n\n"
            "def render_widget(widget):\n"
            "    return f'<div>{widget}</div>'\n"
        ),
        "widgets/args.go": (
            "package widgets\n\n"
            "// ExactArgs returns a validator that wants exactly n arguments.\n"
            "func ExactArgs(n int) func([]string) error {\n"
            "\treturn func(args []string) error { return nil }\n"
            "}\n"
        ),
    },
    ("acme", "gadgets"): {
        "gadget.py": "def gadget_power(level):\n    return level * 9\n",
    },
    ("globex", "vault"): {
        "vault.py": (
            "def dispatch_request(secret_request):\n"
            "    # globex_vault_secret: only globex may ever read this\n"
            "    return VAULT[secret_request]\n"
        ),
    },
}


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neo_assets.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@dataclass
class Served:
    url: str
    log_path: Path
    proc: subprocess.Popen[bytes]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@dataclass
class ServedKb:
    root: Path
    env: dict[str, str]

    @classmethod
    def build(
        cls,
        root: Path,
        repos: dict[tuple[str, str], dict[str, str]] | None = None,
        existing: dict[tuple[str, str], Path] | None = None,
        **extra_env: str,
    ) -> "ServedKb":
        """``repos``: (tenant, slug) -> files of a git repo made here (default REPOS);
        ``existing``: (tenant, slug) -> a directory declared as it is (a copied clone);
        ``extra_env``: NEO_* settings of the sweeps and of every later command (e.g. a
        provider other than the hashing embedder)."""
        home = root / "neo-home"
        home.mkdir(parents=True)
        entries: dict[str, list[dict[str, Any]]] = {}
        for (tenant, slug), files in (REPOS if repos is None else repos).items():
            repo = GitRepo(root / f"{tenant}-{slug}")
            for rel, text in files.items():
                repo.write(rel, text)
            repo.commit("initial", when=1_700_000_000)
            entries.setdefault(tenant, []).append(repo_entry(slug, repo.path, version="2.0.0"))
        for (tenant, slug), path in (existing or {}).items():
            entries.setdefault(tenant, []).append(repo_entry(slug, path, version="2.0.0"))
        tenants_path = write_tenants(root / "tenants.yaml", entries)
        env = {k: v for k, v in os.environ.items() if not k.startswith("NEO_")}
        env |= {
            "NEO_HOME": str(home),
            "DAGSTER_HOME": str(home / "dagster"),
            "NEO_TENANTS_FILE": str(tenants_path),
            "NEO_EMBEDDING_PROVIDER": "hashing",
            # The default a user gets: one local Chroma server for every process.
            "NEO_CHROMA_LOCAL": "server",
            "NEO_CHROMA_SERVER_IDLE_S": "5",
        }
        env |= extra_env
        kb = cls(root, env)
        with kb.environment():
            (root / "dagster").mkdir()
            instance = dg.DagsterInstance.local_temp(str(root / "dagster"))
            try:
                results = run_sweeps(load_settings(), load_tenants(tenants_path), instance)
            finally:
                instance.dispose()
        assert {r["outcome"] for r in results} == {"complete"}, results
        return kb

    @contextlib.contextmanager
    def environment(self) -> Iterator[None]:
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(self.env)
        try:
            yield
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def stop_store(self) -> None:
        """Stop the local Chroma server the knowledge base's processes shared."""
        home = Path(self.env["NEO_HOME"])
        stop_local_server(ServerPaths.under(home, home / "chroma"))

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return cli(self.env, *args)

    def cli_env(self, extra: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        return cli(self.env | extra, *args)

    def issue(self, tenant: str, *repos: str, name: str = "") -> dict[str, Any]:
        args = ["token", "issue", "--tenant", tenant, "--json"]
        for repo in repos:
            args += ["--repo", repo]
        if name:
            args += ["--name", name]
        done = self.cli(*args)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    @contextlib.contextmanager
    def serve(self, **extra_env: str) -> Iterator[Served]:
        port = free_port()
        log_path = self.root / f"serve-{port}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "neo_assets.cli",
                    "serve",
                    "--host",
                    LOOPBACK,
                    "--port",
                    str(port),
                ],
                cwd=ROOT,
                env=self.env | extra_env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        served = Served(f"http://{LOOPBACK}:{port}", log_path, proc)
        try:
            deadline = time.monotonic() + 90
            while True:
                if proc.poll() is not None:
                    raise AssertionError(f"serve exited {proc.returncode}: {served.log()[-3000:]}")
                try:
                    if httpx.get(f"{served.url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise AssertionError(f"serve did not start: {served.log()[-3000:]}")
                time.sleep(0.2)
            yield served
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
