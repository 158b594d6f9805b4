"""A sweep's work follows what changed: unchanged blobs are not re-read or re-parsed,
and the result equals a full rebuild."""

import time
from pathlib import Path

import pytest

from neo_assets.config.settings import load_settings
from neo_assets.embedding.providers.hashing import HashingProvider
from neo_assets.sources import git_blobs
from neo_assets.store.ledger import Ledger
from neo_assets.sweep.chunk import chunk_step
from neo_assets.sweep.context import RepoContext
from neo_assets.sweep.envelope import envelope_step
from neo_assets.sweep.run import StageEnded, SweepInputs, run_sweep
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import KbHandles
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


def _files(n: int) -> dict[str, str]:
    return {
        f"pkg/mod_{i:03d}.py": (
            f"def handler_{i}(x):\n    return x + {i}\n\n\nclass C{i}:\n    pass\n"
        )
        for i in range(n)
    }


@pytest.fixture
def env(kb: KbHandles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    repo = GitRepo(tmp_path / "r")
    for rel, text in _files(30).items():
        repo.write(rel, text)
    repo.write("img.bin", b"\x00\x01binary")
    repo.commit("one", when=1_700_000_000)
    tenants = write_tenants(tmp_path / "t.yaml", {"acme": [repo_entry("w", repo.path)]})
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    reads: list[str] = []
    # Every blob git hands back, whether asked one by one (read) or ahead (read_many).
    original = git_blobs.CatFile._answer

    def counting_answer(self, oid):  # noqa: ANN001, ANN202
        reads.append(oid)
        return original(self, oid)

    monkeypatch.setattr(git_blobs.CatFile, "_answer", counting_answer)
    return {"repo": repo, "tenants": tenants, "reads": reads, "tmp": tmp_path, "kb": kb}


def _ctx(tenants_path: Path) -> RepoContext:
    t = load_tenants(tenants_path).tenants[0]
    return RepoContext(tenant=t, repo=t.repos[0])


def _sweep(kb: KbHandles, ctx: RepoContext, ledger: Ledger | None = None) -> dict:
    """One sweep through run_sweep: the chunk stage's tally, the lane's summary, the result."""
    ended: dict[str, StageEnded] = {}
    result = run_sweep(
        SweepInputs(
            ctx=ctx,
            settings=load_settings(),
            ledger=ledger or kb.ledger,
            open_store=lambda: kb.store,
            provider=HashingProvider(),
            run_id="test-incremental",
        ),
        lambda e: ended.update({e.stage: e}) if isinstance(e, StageEnded) else None,
    )
    return {
        "chunks": ended["chunk_generation"].tally,
        "summary": ended["kb_embeddings"].summary,
        "result": result.to_doc(),
    }


def test_one_file_commit_rereads_and_reparses_only_that_file(env) -> None:
    ctx = _ctx(env["tenants"])
    first = _sweep(env["kb"], ctx)
    assert first["chunks"].parsed_paths == 30
    # Every blob read once: the envelope classifies it and keeps the text blobs for the
    # chunk stage, which asks git for nothing more (30 files and a binary one).
    assert sorted(env["reads"]) == sorted(set(env["reads"])) and len(env["reads"]) == 31
    env["reads"].clear()

    env["repo"].write("pkg/mod_007.py", "def handler_7(x):\n    return x * 7\n")
    env["repo"].commit("change one", when=1_700_000_500)
    second = _sweep(env["kb"], ctx)
    assert second["chunks"].parsed_paths == 1
    assert second["chunks"].reused_paths == 29
    assert len(env["reads"]) == 1  # the new blob, read once to classify and parse it
    assert second["summary"].counts.embedded == 1
    assert second["result"]["outcome"] == "complete"


def test_forced_unchanged_sweep_reads_and_parses_nothing(env) -> None:
    ctx = _ctx(env["tenants"])
    _sweep(env["kb"], ctx)
    env["reads"].clear()
    again = _sweep(env["kb"], ctx)
    assert env["reads"] == []
    assert again["chunks"].parsed_paths == 0
    assert again["summary"].counts.embedded == 0


def test_incremental_generation_equals_a_full_rebuild(env) -> None:
    ctx = _ctx(env["tenants"])
    _sweep(env["kb"], ctx)
    repo = env["repo"]
    repo.write("pkg/mod_001.py", "def changed():\n    return 1\n")
    repo.remove("pkg/mod_002.py")
    repo.write("pkg/new.py", "def fresh():\n    return 2\n")
    repo.commit("mixed", when=1_700_001_000)
    _sweep(env["kb"], ctx)
    ledger = env["kb"].ledger
    incremental = sorted(
        (c.chunk_id, c.source_path, c.kind, c.name) for c in ledger.declared_chunks("acme", "w")
    )
    fresh = Ledger.open(f"sqlite:///{env['tmp'] / 'fresh.sqlite'}")
    settings = load_settings()
    now = time.time()
    e = envelope_step(ctx, settings, fresh, now)
    chunk_step(ctx, settings, fresh, e, now)
    full = sorted(
        (c.chunk_id, c.source_path, c.kind, c.name) for c in fresh.declared_chunks("acme", "w")
    )
    assert incremental == full
    assert not any(p == "pkg/mod_002.py" for _, p, _, _ in incremental)
    # The envelope recorded by rewriting only its 3 changed paths is the one listed afresh.
    assert _envelope_rows(ledger) == _envelope_rows(fresh)
    assert {p for p, *_ in _envelope_rows(ledger)} >= {"pkg/new.py", "pkg/mod_001.py"}


def _envelope_rows(ledger: Ledger) -> list[tuple]:
    head, rows = ledger.envelope_rows("acme", "w")
    assert head["revision"] and len(rows) == 31  # 30 files - 1 + 1, and the binary
    return sorted(rows)


def test_parser_bump_reparses_everything(env, tmp_path: Path) -> None:
    ctx = _ctx(env["tenants"])
    _sweep(env["kb"], ctx)
    write_tenants(env["tenants"], {"acme": [repo_entry("w", env["repo"].path, version="1.1.0")]})
    bumped = _sweep(env["kb"], _ctx(env["tenants"]))
    assert bumped["chunks"].parsed_paths == 30
    assert bumped["summary"].counts.embedded == bumped["chunks"].chunks


def test_rows_missing_after_an_incomplete_sweep_are_refilled(env) -> None:
    ctx = _ctx(env["tenants"])
    _sweep(env["kb"], ctx)
    store = env["kb"].store
    victims = [r["id"] for r in store.tenant_rows("acme")][:3]
    store.delete_ids(victims)  # as if an earlier sweep never finished writing them
    again = _sweep(env["kb"], ctx)
    assert again["chunks"].parsed_paths == 0
    assert again["summary"].counts.embedded == 3
    assert store.present_ids(victims) == set(victims)


def test_a_release_that_changes_the_parsers_rules_reparses_unchanged_files(
    env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same declared version, other rules (a table, a grammar version): the recorded
    chunks are not trusted; every file is parsed again. Where the output is the same, the
    ids are too, so nothing is embedded again."""
    ctx = _ctx(env["tenants"])
    _sweep(env["kb"], ctx)
    monkeypatch.setattr("neo_assets.sweep.chunk.parser_rules_digest", lambda: "0123456789abcdef")
    again = _sweep(env["kb"], ctx)
    assert again["chunks"].parsed_paths == 30 and again["chunks"].reused_paths == 0
    assert again["summary"].counts.embedded == 0
    assert again["result"]["outcome"] == "complete"
