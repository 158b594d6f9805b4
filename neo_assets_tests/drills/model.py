"""The simulation's world: real repositories, a real tenants file, the real pipeline.

``World`` owns one NEO_HOME (Chroma persistent dir + SQLite ledger) and three repos of two
tenants — acme/alpha (git), acme/beta (a plain directory, declared or not), globex/gamma
(git) — and drives them the way operators and users do: edit, add, delete and rename
files; bump a parser; add or remove an exclude glob; change a tenant's declaration; switch
the fault server's mode; sweep (whole, or interrupted at a chosen point); reconcile.

It also keeps the *model*: what each repo's tree holds, what its declaration says, and so
which paths the envelope must yield. Sweeps call the stage modules of ``neo_assets.sweep``
directly (the same functions the Dagster assets call; a Dagster run costs seconds), or go
through ``run_sweeps`` when asked.
"""

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neo_assets.config.settings import Settings, load_settings
from neo_assets.core import codes
from neo_assets.embedding.cancel import CancelScope
from neo_assets.health.freezing import unfreeze
from neo_assets.reconcile.tenant import reconcile_tenant
from neo_assets.services.handles import build_provider
from neo_assets.sources.parsers.neo_code import PARSER_ID, chunk_file
from neo_assets.sweep.census import census_step
from neo_assets.sweep.chunk import chunk_step, plan_chunks
from neo_assets.sweep.context import RepoContext
from neo_assets.sweep.embed import embed_step
from neo_assets.sweep.embed_plan import EmbedContext
from neo_assets.sweep.envelope import envelope_step
from neo_assets.tenants.validation import TenantsFile, load_tenants
from neo_assets_tests.drills.harness import release_store
from neo_assets_tests.fakes.fault_server import marker
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import KbHandles
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

REPOS = ("acme/alpha", "acme/beta", "globex/gamma")
PATHS = ("a.txt", "b.txt", "c.py", "d.md", "sub/e.txt", "sub/f.py")
EXCLUDES = ("*.md", "sub/**")
CONTENT_KINDS = ("plain", "poison", "kill", "huge")
FAULT_MODES = ("healthy", "slow", "refusing", "resetting")
# How a sweep may end early: a crash after a step (the process died there), a cancelled
# lane (an abort) with or without the census after it, or a store that fails its writes.
SWEEP_ENDINGS = (
    "whole",
    "crash-after-envelope",
    "crash-after-chunks",
    "cancel-then-census",
    "cancel-then-crash",
    "write-failure",
    "dagster",
)
MAX_KILL_FILES = 2  # each costs fault-server restarts per sweep until it is fenced
BAND_CHARS = 540  # the admission band with the settings below (200 tokens x 0.9 x 3 chars)


def sim_env(server: FaultServerSupervisor) -> dict[str, str]:
    """Settings for the simulation: the fault server as provider, small batches, a short
    call ceiling and short recovery waits (a killed server restarts within them)."""
    return {
        "NEO_EMBEDDING_PROVIDER": "openai_compatible",
        "NEO_EMBEDDING_BASE_URL": server.base_url,
        "NEO_EMBEDDING_MODEL": "fault-embed",
        "NEO_EMBEDDING_DIMENSIONS": "32",
        "NEO_EMBEDDING_BATCH_SIZE": "3",
        "NEO_EMBEDDING_CONTEXT_TOKENS": "200",
        "NEO_EMBEDDING_CHARS_PER_TOKEN": "3",
        "NEO_EMBEDDING_CALL_CEILING_MS": "1500",
        "NEO_EMBEDDING_RECOVERY_INITIAL_S": "0.05",
        "NEO_EMBEDDING_RECOVERY_MAX_S": "0.2",
        "NEO_EMBEDDING_RECOVERY_MAX_WAIT_S": "1.0",
        "NEO_BACKOFF_JITTER_S": "0",
        "NEO_SWEEP_LEASE_TTL_S": "5",
        # The model serves a parser bump once its chunks are complete: it has no quality
        # gate (the gate's hold is quality/test_parser_gate_e2e.py's subject).
        "NEO_QUALITY_GATE": "false",
    }


def file_text(path: str, kind: str, n: int) -> str:
    """Deterministic content of one file; markers make the fault server misbehave on it."""
    if kind == "poison":
        tag = f" {marker('bad_request')}"
    elif kind == "kill":
        tag = f" {marker('kill')}"
    else:
        tag = ""
    if kind == "huge":
        body = f"line {n} of an oversized file " * 30  # one chunk over the admission band
        return body + "\n"
    if path.endswith(".py"):
        return f'"""{path} v{n}{tag}"""\n\n\ndef f{n}(x):\n    return x + {n}\n'
    if path.endswith(".md"):
        return f"# {path}\n\nrevision {n}{tag}\n\n## more\n\nsection two {n}\n"
    return f"text of {path}, revision {n}{tag}\n"


@dataclass
class RepoModel:
    """What one repo is and should be, as the model sees it."""

    tenant: str
    slug: str
    kind: str  # "git" or "dir"
    path: Path
    files: dict[str, tuple[str, int]] = field(default_factory=dict)  # path -> (kind, n)
    parser_patch: int = 0
    exclude: tuple[str, ...] = ()
    cadence: int | None = None
    declared: bool = True
    settled: bool = True  # its last sweep ran its census after its last parse/embed
    head: str | None = None  # git: the commit the model expects the envelope at

    @property
    def key(self) -> tuple[str, str]:
        return (self.tenant, self.slug)

    def yielded(self) -> set[str]:
        """The paths the envelope must yield: every file not excluded (independent of
        the project's glob code: the two globs are matched by hand here)."""
        out = set()
        for p in self.files:
            if "*.md" in self.exclude and p.endswith(".md"):
                continue
            if "sub/**" in self.exclude and p.startswith("sub/"):
                continue
            out.add(p)
        return out


class World:
    def __init__(self, root: Path, server: FaultServerSupervisor) -> None:
        self.root = root
        self.server = server
        self.tenants_path = root / "tenants.yaml"
        self.clock = 1_800_000_000.0
        self.repos: dict[str, RepoModel] = {}
        for key in REPOS:
            tenant, slug = key.split("/")
            kind = "dir" if slug == "beta" else "git"
            path = root / "repos" / slug
            if kind == "git":
                GitRepo(path)
            else:
                path.mkdir(parents=True)
            self.repos[key] = RepoModel(tenant, slug, kind, path)
        self.owners: dict[str, set[str]] = {"acme": {"alpha", "beta"}, "globex": {"gamma"}}
        self.fault = "healthy"
        self.instance: Any = None
        self.kb = KbHandles()  # the world's store and ledger, closed by ``close``
        self.write_tenants()
        for key in REPOS:  # every repo starts with one file, committed
            self.write_file(key, "a.txt", "plain", 0)

    # ------------------------------------------------------------------ time and handles
    def now(self) -> float:
        self.clock += 1.0
        return self.clock

    def settings(self, **overrides: Any) -> Settings:
        return load_settings(**overrides)

    def tenants(self) -> TenantsFile:
        return load_tenants(self.tenants_path)

    def close(self) -> None:
        if self.instance is not None:
            self.instance.dispose()
        self.kb.close()
        release_store()
        shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------------ the declaration
    def write_tenants(self) -> None:
        declared: dict[str, list[dict[str, Any]]] = {"acme": [], "globex": []}
        for repo in self.repos.values():
            if not repo.declared:
                continue
            entry = repo_entry(
                repo.slug,
                repo.path,
                version=f"1.0.{repo.parser_patch}",
                exclude=list(repo.exclude),
            )
            if repo.cadence is not None:
                entry["cadence_minutes"] = repo.cadence
            declared[repo.tenant].append(entry)
        write_tenants(self.tenants_path, declared)

    def bump_parser(self, key: str) -> None:
        self.repos[key].parser_patch += 1
        self.write_tenants()

    def toggle_exclude(self, key: str, glob: str) -> None:
        repo = self.repos[key]
        globs = set(repo.exclude) ^ {glob}
        repo.exclude = tuple(sorted(globs))
        self.write_tenants()

    def change_config(self, tenant: str) -> None:
        """A declaration change that is not about paths or parsers (the cadence): the
        tenant's configVersion moves, the rows' tenantConfigVersion trails it."""
        repo = next(r for r in self.repos.values() if r.tenant == tenant and r.declared)
        repo.cadence = None if repo.cadence == 45 else 45
        self.write_tenants()

    def toggle_beta(self) -> None:
        beta = self.repos["acme/beta"]
        beta.declared = not beta.declared
        self.write_tenants()

    def declared_keys(self) -> list[tuple[str, str]]:
        return [r.key for r in self.repos.values() if r.declared]

    # ------------------------------------------------------------------ the trees
    def _commit(self, repo: RepoModel) -> None:
        if repo.kind == "git":
            git = GitRepo(repo.path, init=False)
            repo.head = git.commit("sim", when=self.now())

    def kill_files(self) -> int:
        return sum(1 for r in self.repos.values() for kind, _ in r.files.values() if kind == "kill")

    def write_file(self, key: str, path: str, kind: str, n: int) -> None:
        repo = self.repos[key]
        if kind == "kill" and self.kill_files() >= MAX_KILL_FILES:
            kind = "plain"
        target = repo.path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(file_text(path, kind, n))
        repo.files[path] = (kind, n)
        self._commit(repo)

    def delete_file(self, key: str, path: str) -> None:
        repo = self.repos[key]
        (repo.path / path).unlink()
        del repo.files[path]
        self._commit(repo)

    def rename_file(self, key: str, src: str, dst: str) -> None:
        repo = self.repos[key]
        target = repo.path / dst
        target.parent.mkdir(parents=True, exist_ok=True)
        (repo.path / src).rename(target)
        repo.files[dst] = repo.files.pop(src)
        self._commit(repo)

    # ------------------------------------------------------------------ the provider
    def set_fault(self, mode: str) -> None:
        self.server.reset()
        if mode == "slow":
            self.server.configure(latency_s=0.05)
        elif mode == "refusing":
            self.server.refuse()
        elif mode == "resetting":
            self.server.configure(mode="reset")
        self.fault = mode

    # ------------------------------------------------------------------ sweeping
    def context(self, key: str) -> RepoContext:
        repo = self.repos[key]
        tenants = self.tenants()
        tenant = tenants.tenant(repo.tenant)
        assert tenant is not None
        decl = tenant.repo(repo.slug)
        assert decl is not None, f"{key} is not declared"
        return RepoContext(tenant, decl)

    def sweep(self, key: str, ending: str = "whole", k: int = 1) -> dict[str, Any] | None:
        """One sweep of a declared repo, ended as ``ending`` says; the census result, or
        None when the sweep "crashed" before its census."""
        if ending == "dagster":
            return self._sweep_dagster(key)
        repo = self.repos[key]
        ctx = self.context(key)
        settings = self.settings()
        ledger, store = self.kb.ledger, self.kb.store
        now = self.now()
        envelope = envelope_step(ctx, settings, ledger, now)
        if ending == "crash-after-envelope":
            return None
        repo.settled = False
        plan = plan_chunks(ctx, settings, ledger, envelope)
        chunks = chunk_step(ctx, settings, ledger, envelope, now, plan=plan)
        if ending == "crash-after-chunks":
            return None
        scope = CancelScope(label="sweep")
        progress: Callable[[int, int, int], None] | None = None
        guard: Callable[[], None] | None = None
        if ending in ("cancel-then-census", "cancel-then-crash"):

            def progress(done: int, total: int, embedded: int) -> None:
                if done >= k:
                    scope.cancel(codes.ABORT_ERR)

        elif ending == "write-failure":
            writes = [0]

            def guard() -> None:
                writes[0] += 1
                if writes[0] > k:
                    raise OSError(28, "No space left on device (simulated store failure)")

        summary = embed_step(
            ctx,
            settings,
            store,
            ledger,
            envelope,
            chunks,
            EmbedContext(
                provider=build_provider(settings),
                cancel_scope=scope,
                clock=self.now,
                progress=progress,
                guard=guard,
            ),
        )
        if ending == "cancel-then-crash":
            return None
        result = census_step(ctx, settings, ledger, envelope, summary, self.now()).to_doc()
        repo.settled = True
        return result

    def _sweep_dagster(self, key: str) -> dict[str, Any]:
        import dagster as dg

        from neo_assets.cli.launch import run_sweeps

        if self.instance is None:
            (self.root / "dagster").mkdir(exist_ok=True)
            (self.root / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
            self.instance = dg.DagsterInstance.local_temp(str(self.root / "dagster"))
        repo = self.repos[key]
        (result,) = run_sweeps(
            self.settings(),
            self.tenants(),
            self.instance,
            tenant=repo.tenant,
            repo=repo.slug,
            force=True,
        )
        if result["outcome"] != codes.OUTCOME_FAILED:
            repo.settled = True
        return result

    # ------------------------------------------------------------------ reconciling
    def reconcile(self, tenant: str, *, reclaim: bool, write: bool = True) -> dict[str, Any]:
        settings = self.settings(reconciliation_enabled=reclaim)
        outcome = reconcile_tenant(
            settings,
            self.tenants(),
            tenant,
            self.kb.store,
            self.kb.ledger,
            write=write,
        )
        return outcome.report

    def unfreeze(self) -> bool:
        """An operator lifts the write path's freeze; True when one was lifted."""
        settings = self.settings()
        _, lifted = unfreeze(self.kb.ledger, settings.store.collection_name, time.time())
        return lifted is not None

    def expected_declared(self, key: str) -> set[str]:
        """The chunk ids a full parse of the model's yielded files gives (what the declared
        generation must hold, however incrementally the sweep recorded it)."""
        return {i for ids in self.expected_declared_by_path(key).values() for i in ids}

    def expected_declared_by_path(self, key: str) -> dict[str, set[str]]:
        repo = self.repos[key]
        settings = self.settings()
        ids: dict[str, set[str]] = {}
        for path in repo.yielded():
            chunks = chunk_file(
                repo.tenant,
                repo.slug,
                path,
                (repo.path / path).read_text(),
                PARSER_ID,
                f"1.0.{repo.parser_patch}",
                max_chunk_chars=settings.sweep.max_chunk_chars,
                window_lines=settings.sweep.window_lines,
            ).chunks
            ids[path] = {c.chunk_id for c in chunks}
        return ids

    def revisions(self) -> dict[tuple[str, str], str]:
        """The revision each declared repo's envelope must be at: git HEAD, or the
        recorded digest for a plain directory (its own content digest)."""
        from neo_assets.sources.envelope import resolve_revision

        settings = self.settings()
        out = {}
        for repo in self.repos.values():
            if repo.declared:
                out[repo.key] = repo.head or resolve_revision(
                    repo.path, exclude=repo.exclude, max_file_bytes=settings.sweep.max_file_bytes
                )
        return out
