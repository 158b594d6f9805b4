"""One real sweep environment for end-to-end outcome tests.

A tmp NEO_HOME (the ``neo_home`` fixture), a real git repo, a real tenants file, a
``DagsterInstance.local_temp``, the persistent Chroma under NEO_HOME, and the
fault-injecting OpenAI-compatible server as the embedding provider (env vars below).
``SweepEnv.sweep`` goes through ``run_sweeps`` (one Dagster run per repo, then the status
job), so every outcome is what the real sweep decided and persisted.

    env = SweepEnv.create(tmp_path, server, files={"a.txt": "..."})
    result = env.sweep(force=True)           # the repo's result dict from run_sweeps
    env.state()                               # the ledger's repo_state row
    env.status()                              # the status snapshot row (in process)
    env.cli_status()                          # the same, from `neo-assets status --json`
"""

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
import sqlalchemy as sa

from neo_assets.cli.launch import run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.core.ids.stamps import tenant_filter
from neo_assets.generations.serving import configured_generation, generation_store
from neo_assets.sources.parsers.neo_code import PARSER_ID, chunk_file
from neo_assets.status.report import build_status
from neo_assets.store import ledger_schema as t
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import KbHandles
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

ROOT = Path(__file__).resolve().parent.parent
TENANT = "acme"
SLUG = "widgets"
PARSER_VERSION = "1.0.0"  # tenantfiles.repo_entry's default
DIMENSIONS = 32
MODEL = "fault-embed"
# The admission band: floor(CONTEXT_TOKENS × 0.9) tokens × 3 chars per token = 540 chars.
CONTEXT_TOKENS = 200
BAND_CHARS = 540
CADENCE_MINUTES = 1
BACKOFF_CAP_MINUTES = 5


def sweep_env_vars(server: FaultServerSupervisor) -> dict[str, str]:
    """Settings for a sweep against ``server``: small batches; a call ceiling short enough
    for a ``hang`` marker to cost little, long enough that a loaded machine never times
    out a healthy request; a recovery wait a restart of the killed server fits in (it
    ends as soon as the server answers); no jitter; a 1-minute cadence, a 5-minute cap."""
    return {
        "NEO_EMBEDDING_PROVIDER": "openai_compatible",
        "NEO_EMBEDDING_BASE_URL": server.base_url,
        "NEO_EMBEDDING_MODEL": MODEL,
        "NEO_EMBEDDING_DIMENSIONS": str(DIMENSIONS),
        "NEO_EMBEDDING_BATCH_SIZE": "4",
        "NEO_EMBEDDING_CONTEXT_TOKENS": str(CONTEXT_TOKENS),
        "NEO_EMBEDDING_CHARS_PER_TOKEN": "3",
        "NEO_EMBEDDING_CALL_CEILING_MS": "3000",
        "NEO_EMBEDDING_RECOVERY_INITIAL_S": "0.05",
        "NEO_EMBEDDING_RECOVERY_MAX_S": "0.25",
        "NEO_EMBEDDING_RECOVERY_MAX_WAIT_S": "15",
        "NEO_BACKOFF_JITTER_S": "0",
        "NEO_DEFAULT_CADENCE_MINUTES": str(CADENCE_MINUTES),
        "NEO_BACKOFF_CAP_MINUTES": str(BACKOFF_CAP_MINUTES),
    }


def text_file(body: str) -> str:
    """A ``.txt`` file's text: under ``window_lines`` lines, so it is exactly one chunk."""
    return body.rstrip("\n") + "\n"


@dataclass
class SweepEnv:
    root: Path
    repo: GitRepo
    tenants_path: Path
    instance: dg.DagsterInstance
    server: FaultServerSupervisor
    commits: int = 0
    kb: KbHandles = field(default_factory=KbHandles, repr=False)  # closed by ``close``

    @classmethod
    def create(cls, root: Path, server: FaultServerSupervisor, files: dict[str, str]) -> "SweepEnv":
        """The repo with ``files`` committed once; NEO_TENANTS_FILE must point at
        ``root / "tenants.yaml"`` (``env_vars``)."""
        repo = GitRepo(root / "repo")
        tenants_path = write_tenants(root / "tenants.yaml", {TENANT: [repo_entry(SLUG, repo.path)]})
        (root / "dagster").mkdir(exist_ok=True)
        instance = dg.DagsterInstance.local_temp(str(root / "dagster"))
        env = cls(root, repo, tenants_path, instance, server)
        env.commit(files)
        return env

    def env_vars(self) -> dict[str, str]:
        return {**sweep_env_vars(self.server), "NEO_TENANTS_FILE": str(self.tenants_path)}

    def close(self) -> None:
        self.kb.close()
        self.instance.dispose()

    # ------------------------------------------------------------------ the repo
    def commit(self, files: dict[str, str]) -> str:
        for rel, text in files.items():
            self.repo.write(rel, text)
        self.commits += 1
        return self.repo.commit(f"commit {self.commits}", when=1_700_000_000 + self.commits)

    def head(self) -> str:
        return self.repo.git("rev-parse", "HEAD")

    # ------------------------------------------------------------------ the sweep
    def sweep(self, *, force: bool = False) -> dict[str, Any]:
        settings = load_settings()
        results = run_sweeps(settings, load_tenants(self.tenants_path), self.instance, force=force)
        assert len(results) == 1, results
        return results[0]

    # ------------------------------------------------------------------ what was persisted
    @property
    def ledger(self) -> Ledger:
        return self.kb.ledger

    @property
    def store(self) -> ChromaStore:
        """The configured embedding generation's collection: where sweeps write now."""
        settings = load_settings()
        return generation_store(
            settings, self.ledger, self.kb.store, configured_generation(settings)
        )

    def generation(self) -> str:
        return configured_generation(load_settings())

    def state(self) -> dict[str, Any]:
        row = self.ledger.repo_state(TENANT, SLUG)
        assert row is not None, "the repo was never swept"
        return row

    def last_summary(self) -> dict[str, Any]:
        return json.loads(self.state()["last_summary"])

    def status(self) -> dict[str, Any]:
        settings = load_settings()
        snap = build_status(settings, load_tenants(self.tenants_path), self.ledger, self.store)
        (row,) = snap["repos"]
        return row

    def cli_status(self) -> dict[str, Any]:
        """``neo-assets status --json`` in a new process: nothing cached survives."""
        done = subprocess.run(
            [sys.executable, "-m", "neo_assets.cli", "status", "--json"],
            cwd=ROOT,
            env=dict(os.environ),  # the same NEO_* settings this process runs with
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        (row,) = json.loads(done.stdout)["repos"]
        return row

    def chunk_ids(self, source_path: str) -> list[str]:
        """The declared chunk ids of one path (the ledger's declared generation)."""
        return sorted(
            c.chunk_id
            for c in self.ledger.declared_chunks(TENANT, SLUG)
            if c.source_path == source_path
        )

    def chunk_id(self, source_path: str) -> str:
        (only,) = self.chunk_ids(source_path)
        return only

    def parsed_chunk_id(self, source_path: str) -> str:
        """The id the parser gives the one chunk of ``source_path`` at HEAD (before any
        sweep recorded it)."""
        settings = load_settings()
        text = (self.repo.path / source_path).read_text()
        (only,) = chunk_file(
            TENANT,
            SLUG,
            source_path,
            text,
            PARSER_ID,
            PARSER_VERSION,
            max_chunk_chars=settings.sweep.max_chunk_chars,
            window_lines=settings.sweep.window_lines,
        ).chunks
        return only.chunk_id

    def row_ids(self) -> set[str]:
        return {r["id"] for r in self.store.iter_rows(tenant_filter(TENANT, SLUG))}

    def fence_records(self) -> dict[str, dict[str, Any]]:
        return {r["chunk_id"]: r for r in self.ledger.fences(TENANT, SLUG, self.generation())}

    def write_repo_state(self, **values: Any) -> None:
        """Overwrite ledger columns directly (a torn record, or time passing)."""
        with self.ledger.engine.begin() as conn:
            conn.execute(
                sa.update(t.repo_state)
                .where(t.repo_state.c.tenant_id == TENANT, t.repo_state.c.repo_slug == SLUG)
                .values(**values)
            )

    def insert_fence_record(
        self,
        chunk_id: str,
        *,
        disposition: Any,
        reason_code: str,
        receipt: str | None = "{}",
        observed_at: float = 1_700_000_000.0,
    ) -> None:
        """A fences row written straight through SQL, as a corrupted or foreign record."""
        with self.ledger.engine.begin() as conn:
            conn.execute(
                sa.insert(t.fences).values(
                    tenant_id=TENANT,
                    repo_slug=SLUG,
                    generation=self.generation(),
                    chunk_id=chunk_id,
                    disposition=disposition,
                    reason_code=reason_code,
                    receipt=receipt,
                    observed_at=observed_at,
                )
            )
