"""The chunk stage in waves: parsing overlaps embedding and writing, and the result is the
serial stage's, with every row declared before it is written."""

import time
from pathlib import Path
from typing import Any

import pytest

from neo_assets.concurrency.chunk_waves import (
    AHEAD_READY_WAIT_S,
    ChunkingFailed,
    ChunkWaves,
    pipelined,
)
from neo_assets.concurrency.parse_helper import READY_WAIT_S, Parser
from neo_assets.config.settings import load_settings
from neo_assets.config.tenants import load_tenants
from neo_assets.core import codes
from neo_assets.core.sweep.outcomes import classify_sweep_outcome
from neo_assets.defs.sweep import frame_tally
from neo_assets.embedding.providers.hashing import HashingProvider
from neo_assets.services.handles import open_ledger, open_store
from neo_assets.services.sweep.steps import (
    EmbedContext,
    RepoContext,
    census_step,
    chunk_step,
    embed_step,
    envelope_step,
    plan_chunks,
)
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import KbHandles
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

FILES = 30
PER_FILE = 2  # a function and a class


def _text(i: int, extra: str = "") -> str:
    return f"def handler_{i}(x):\n    return x + {i}\n\n\nclass C{i}:\n    pass\n{extra}"


@pytest.fixture
def repo(kb: KbHandles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    git = GitRepo(tmp_path / "r")
    for i in range(FILES):
        git.write(f"pkg/mod_{i:03d}.py", _text(i))
    git.commit("one", when=1_700_000_000)
    tenants = write_tenants(tmp_path / "t.yaml", {"acme": [repo_entry("w", git.path)]})
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    # Waves of 7 files from 5 files to parse up: 30 files are 5 waves.
    monkeypatch.setenv("NEO_PARSE_WAVES", "true")  # the hashing embedder's default is none
    monkeypatch.setenv("NEO_PARSE_WAVE_MIN_FILES", "5")
    monkeypatch.setenv("NEO_PARSE_WAVE_FILES", "7")
    t = load_tenants(tenants).tenants[0]
    return {"git": git, "ctx": RepoContext(tenant=t, repo=t.repos[0]), "kb": kb}


def _sweep(ctx: RepoContext, *, waves: bool) -> dict[str, Any]:
    """One sweep's stages against the NEO_HOME of the moment, with handles of its own."""
    settings = load_settings()
    with open_ledger(settings) as ledger, open_store(settings) as store:
        return _stages(ctx, settings, store, ledger, waves=waves)


def _stages(
    ctx: RepoContext, settings: Any, store: ChromaStore, ledger: Ledger, *, waves: bool
) -> dict[str, Any]:
    now = time.time()
    env = envelope_step(ctx, settings, ledger, now)
    plan = plan_chunks(ctx, settings, ledger, env)
    run = EmbedContext(provider=HashingProvider())
    if waves:
        assert pipelined(plan, settings)
        with ChunkWaves(ctx, settings, ledger, env, plan, now) as chunk_waves:
            summary = _embed_in_waves(store, ledger, ctx, chunk_waves, run)
            chunks = chunk_waves.finished_tally()
    else:
        chunks = chunk_step(ctx, settings, ledger, env, now, plan=plan)
        summary = embed_step(ctx, settings, store, ledger, env, chunks, run)
        chunks = frame_tally(chunks)
    result = census_step(ctx, settings, ledger, env, summary, now)
    return {"chunks": chunks, "summary": summary, "result": result}


def _embed_in_waves(
    store: ChromaStore, ledger: Ledger, ctx: RepoContext, waves: ChunkWaves, run: EmbedContext
) -> dict[str, Any]:
    """The embedding stage fed by ``waves`` (what the sweep asset does in waves)."""
    return embed_step(
        ctx,
        load_settings(),
        store,
        ledger,
        waves.envelope,
        waves.kept_frame(),
        run,
        waves,
    )


def _declared(ctx: RepoContext) -> set[tuple[str, str, str]]:
    with open_ledger(load_settings()) as ledger:
        return {
            (dc.chunk_id, dc.source_path, dc.blob)
            for dc in ledger.declared_chunks(ctx.tenant_id, ctx.repo_slug)
        }


def _rows(ctx: RepoContext) -> dict[str, tuple[str, tuple[tuple[str, Any], ...]]]:
    ids = sorted(i for i, _, _ in _declared(ctx))
    with open_store(load_settings()) as store:
        rows = store.get_rows(ids, include_documents=True)
    return {
        rid: (
            r["document"],
            tuple(sorted((k, v) for k, v in r["metadata"].items() if k != "ingestedAt")),
        )
        for rid, r in rows.items()
    }


def _fresh_home(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEO_HOME", str(tmp_path / name))


def test_waves_declare_and_write_exactly_what_the_serial_stage_does(
    repo: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = repo["ctx"]
    waved = _sweep(ctx, waves=True)
    assert waved["result"]["outcome"] == codes.OUTCOME_COMPLETE
    assert waved["chunks"].waves == 5
    declared, rows = _declared(ctx), _rows(ctx)

    _fresh_home(tmp_path, "serial-home", monkeypatch)
    serial = _sweep(ctx, waves=False)
    assert serial["result"]["outcome"] == codes.OUTCOME_COMPLETE
    assert len(declared) == PER_FILE * FILES
    assert _declared(ctx) == declared, _declared(ctx) ^ declared
    assert _rows(ctx) == rows and set(rows) == {i for i, _, _ in declared}
    for key in ("chunks", "embedded", "already_present"):
        assert waved["summary"]["counts"][key] == serial["summary"]["counts"][key]
    # What the UI shows of the generation: the same counts, paths and preview rows.
    waved_tally, serial_tally = waved["chunks"], serial["chunks"]
    assert waved_tally.chunks == serial_tally.chunks == PER_FILE * FILES
    assert waved_tally.kinds == serial_tally.kinds and len(waved_tally.kinds) == PER_FILE
    assert waved_tally.paths == serial_tally.paths == {f"pkg/mod_{i:03d}.py" for i in range(FILES)}
    assert waved_tally.preview == serial_tally.preview and len(waved_tally.preview) == 10
    assert (waved_tally.parsed_paths, waved_tally.reused_paths) == (FILES, 0)


def test_no_row_is_written_before_its_declaration(
    repo: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = repo["ctx"]
    ledger = repo["kb"].ledger
    undeclared_at_write: list[str] = []
    original = ChromaStore.add

    def checking_add(self, ids, *args, **kwargs):  # noqa: ANN001, ANN202
        declared = {dc.chunk_id for dc in ledger.declared_chunks(ctx.tenant_id, ctx.repo_slug)}
        undeclared_at_write.extend(i for i in ids if i not in declared)
        return original(self, ids, *args, **kwargs)

    monkeypatch.setattr(ChromaStore, "add", checking_add)
    result = _sweep(ctx, waves=True)
    assert result["summary"]["counts"]["embedded"] == PER_FILE * FILES
    assert undeclared_at_write == []


def test_a_changed_repo_in_waves_replaces_only_what_changed(
    repo: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx, git = repo["ctx"], repo["git"]
    _sweep(ctx, waves=True)
    before = _declared(ctx)
    # 12 files change (two waves), one is deleted, one is new: 12 + 1 to parse.
    for i in range(12):
        git.write(f"pkg/mod_{i:03d}.py", _text(i, f"\n\ndef later_{i}():\n    return {i}\n"))
    git.remove("pkg/mod_029.py")
    git.write("pkg/new.py", _text(99))
    git.commit("change", when=1_700_000_100)
    second = _sweep(ctx, waves=True)
    assert second["result"]["outcome"] == codes.OUTCOME_COMPLETE
    after = _declared(ctx)
    paths_after = {p for _, p, _ in after}
    assert "pkg/mod_029.py" not in paths_after and "pkg/new.py" in paths_after
    unchanged = {f"pkg/mod_{i:03d}.py" for i in range(12, 29)}
    assert {r for r in after if r[1] in unchanged} == {r for r in before if r[1] in unchanged}
    # Each changed file adds one chunk (its others are unchanged, so present); new.py two.
    assert second["summary"]["counts"]["embedded"] == 12 + PER_FILE


def test_a_parse_failure_in_a_later_wave_fails_after_declaring_and_writing_the_earlier(
    repo: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = repo["ctx"]
    calls = [0]
    originals = {"parse": Parser.parse, "parse_shared": Parser.parse_shared}

    def failing_third(name: str):  # noqa: ANN202
        original = originals[name]

        def parse(self, files, **kwargs):  # noqa: ANN001, ANN003, ANN202
            calls[0] += 1  # the waves' parses, whichever way each is parsed
            if calls[0] == 3:
                raise ValueError("the parser choked")
            return original(self, files, **kwargs)

        return parse

    monkeypatch.setattr(Parser, "parse", failing_third("parse"))
    monkeypatch.setattr(Parser, "parse_shared", failing_third("parse_shared"))
    with pytest.raises(ChunkingFailed, match="the parser choked") as failed:
        _sweep(ctx, waves=True)
    assert failed.value.code == codes.PARSE_FAILED
    declared = _declared(ctx)
    assert {p for _, p, _ in declared} == {f"pkg/mod_{i:03d}.py" for i in range(14)}
    written = set(_rows(ctx))
    assert written <= {i for i, _, _ in declared}  # never a row ahead of its declaration

    # The next sweep picks up from there and completes the generation.
    monkeypatch.setattr(Parser, "parse", originals["parse"])
    monkeypatch.setattr(Parser, "parse_shared", originals["parse_shared"])
    again = _sweep(ctx, waves=True)
    assert again["result"]["outcome"] == codes.OUTCOME_COMPLETE
    assert len(_declared(ctx)) == PER_FILE * FILES and set(_rows(ctx)) == {
        i for i, _, _ in _declared(ctx)
    }


def test_a_sweep_cut_between_waves_leaves_what_the_next_sweep_completes(
    repo: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = repo["ctx"]
    settings = load_settings()
    ledger = repo["kb"].ledger
    env = envelope_step(ctx, settings, ledger, time.time())
    plan = plan_chunks(ctx, settings, ledger, env)
    with ChunkWaves(ctx, settings, ledger, env, plan, time.time()) as waves:
        source = iter(waves)
        next(source), next(source)  # two waves declared, then the process "dies"
    assert len(_declared(ctx)) == PER_FILE * 14
    result = _sweep(ctx, waves=True)
    assert result["result"]["outcome"] == codes.OUTCOME_COMPLETE
    tally = result["chunks"]
    assert (tally.parsed_paths, tally.reused_paths) == (FILES - 14, 14)  # the declared 14 kept
    assert tally.chunks == PER_FILE * FILES and len(tally.paths) == FILES
    waved_declared = _declared(ctx)

    _fresh_home(tmp_path, "serial-home", monkeypatch)
    _sweep(ctx, waves=False)
    assert _declared(ctx) == waved_declared


def test_a_lost_lease_stops_the_waves_without_declaring_more(
    repo: dict[str, Any],
) -> None:
    ctx = repo["ctx"]
    settings = load_settings()
    ledger = repo["kb"].ledger
    env = envelope_step(ctx, settings, ledger, time.time())
    plan = plan_chunks(ctx, settings, ledger, env)
    checks = [0]

    def guard() -> None:
        checks[0] += 1
        if checks[0] > 2:
            raise RuntimeError("lease lost")

    with ChunkWaves(ctx, settings, ledger, env, plan, time.time(), guard=guard) as waves:
        summary = _embed_in_waves(
            repo["kb"].store, ledger, ctx, waves, EmbedContext(provider=HashingProvider())
        )
    assert waves.lost and waves.waves_declared == 2
    assert len(_declared(ctx)) == PER_FILE * 14
    assert summary["counts"]["embedded"] == PER_FILE * 14
    # The lane ended with what it had; the caller (the asset) sees the lease and stops.
    assert classify_sweep_outcome(summary).outcome == codes.OUTCOME_COMPLETE


def test_an_abort_before_the_first_wave_defers_the_sweep_never_completes_it(
    repo: dict[str, Any],
) -> None:
    # Found by the soak: nothing kept and the abort at the lane's very first progress
    # report, so no wave was ever taken and no row said so: the sweep read complete over
    # a generation it never declared.
    from neo_assets.embedding.cancel import CancelScope

    ctx = repo["ctx"]
    settings = load_settings()
    ledger = repo["kb"].ledger
    now = time.time()
    env = envelope_step(ctx, settings, ledger, now)
    plan = plan_chunks(ctx, settings, ledger, env)
    scope = CancelScope(label="sweep")

    def abort_at_once(done: int, total: int, embedded: int) -> None:
        scope.cancel(codes.ABORT_ERR)

    with ChunkWaves(ctx, settings, ledger, env, plan, now) as waves:
        run = EmbedContext(provider=HashingProvider(), cancel_scope=scope, progress=abort_at_once)
        summary = _embed_in_waves(repo["kb"].store, ledger, ctx, waves, run)
    verdict = classify_sweep_outcome(summary)
    assert verdict.outcome == codes.OUTCOME_DEFERRED and not verdict.advance_checkpoint
    assert verdict.cause_code == codes.KB_VECTOR_EMBED_ABORTED
    assert len(_declared(ctx)) < PER_FILE * FILES  # not every wave was declared
    again = _sweep(ctx, waves=True)
    assert again["result"]["outcome"] == codes.OUTCOME_COMPLETE
    assert len(_declared(ctx)) == PER_FILE * FILES


def test_reconciliation_has_no_authority_over_a_generation_cut_between_waves(
    repo: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the soak: a parser bump cut after its first wave left the paths not yet
    reached with no declared chunks, which reconciliation read as declared empty, so it
    reclaimed their rows (a hole). Until the last wave, the generation has no authority."""
    from neo_assets.services.reconcile.reading import read_declaration

    ctx = repo["ctx"]
    assert _sweep(ctx, waves=False)["result"]["outcome"] == codes.OUTCOME_COMPLETE
    bumped = write_tenants(
        tmp_path / "t2.yaml", {"acme": [repo_entry("w", repo["git"].path, version="2.0.0")]}
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(bumped))
    tenant = load_tenants(bumped).tenants[0]
    ctx = RepoContext(tenant=tenant, repo=tenant.repos[0])
    settings = load_settings()
    ledger = repo["kb"].ledger
    env = envelope_step(ctx, settings, ledger, time.time())
    plan = plan_chunks(ctx, settings, ledger, env)
    with ChunkWaves(ctx, settings, ledger, env, plan, time.time()) as waves:
        next(iter(waves))  # the first wave replaces the whole generation, then "crash"
    assert len(_declared(ctx)) == PER_FILE * 7  # 23 yielded paths have no chunks declared
    _decl, problems, _records = read_declaration(ledger, "acme", tenant)
    assert problems["w"] == codes.RECONCILE_DECLARATION_MOVED  # no authority: nothing reclaimed

    assert _sweep(ctx, waves=True)["result"]["outcome"] == codes.OUTCOME_COMPLETE
    _decl, problems, _records = read_declaration(ledger, "acme", tenant)
    assert problems["w"] is None  # the last wave restored it


def test_the_first_write_waits_until_the_second_wave_is_declared(
    repo: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A wave is hashed while the previous one is written only if it was declared before
    # that write began (an embedded add holds the GIL): the first write waits for the lead.
    ctx = repo["ctx"]
    declared_at_writes: list[int] = []
    live: list[ChunkWaves] = []
    real_init, real_add = ChunkWaves.__init__, ChromaStore.add

    def init(self, *args, **kwargs) -> None:  # noqa: ANN001, ANN002, ANN003
        real_init(self, *args, **kwargs)
        live.append(self)

    def add(self, ids, *args, **kwargs) -> None:  # noqa: ANN001, ANN002, ANN003
        declared_at_writes.append(live[-1].waves_declared)
        real_add(self, ids, *args, **kwargs)

    monkeypatch.setattr(ChunkWaves, "__init__", init)
    monkeypatch.setattr(ChromaStore, "add", add)
    done = _sweep(ctx, waves=True)
    assert done["result"]["outcome"] == codes.OUTCOME_COMPLETE
    assert declared_at_writes and declared_at_writes[0] >= 2


def _plan_waves(ledger: Ledger, ctx: RepoContext, **kwargs: Any) -> ChunkWaves:
    settings = load_settings()
    env = envelope_step(ctx, settings, ledger, time.time())
    plan = plan_chunks(ctx, settings, ledger, env)
    return ChunkWaves(ctx, settings, ledger, env, plan, time.time(), **kwargs)


def test_a_first_wave_started_ahead_is_declared_before_anyone_iterates(
    repo: dict[str, Any],
) -> None:
    """What the asset does while Dagster records the envelope: the first wave is parsed
    and declared on a thread; the sweep that then iterates is the same as without it."""
    ctx, kb = repo["ctx"], repo["kb"]
    with _plan_waves(kb.ledger, ctx) as waves:
        waves.start_ahead()
        # The count goes up once the wave's declaration is committed (polling the
        # ledger's rows instead raced that increment), so wait on the count.
        deadline = time.monotonic() + 30
        while waves.waves_declared < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert waves.waves_declared == 1
        assert len(_declared(ctx)) == PER_FILE * 7  # the first wave, nothing more
        summary = _embed_in_waves(
            kb.store, kb.ledger, ctx, waves, EmbedContext(provider=HashingProvider())
        )
    assert classify_sweep_outcome(summary).outcome == codes.OUTCOME_COMPLETE
    assert waves.waves_declared == 5
    assert len(_declared(ctx)) == PER_FILE * FILES
    assert set(_rows(ctx)) == {i for i, _, _ in _declared(ctx)}


def test_a_first_wave_started_ahead_waits_a_little_for_the_parse_helper(
    repo: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ahead, this process is busy with Dagster's event: the first wave waits up to
    AHEAD_READY_WAIT_S for the helper rather than be parsed here. The thread's first step
    runs at once, so it must see that it was started ahead (it once did not, by a race)."""
    ctx = repo["ctx"]
    original = Parser.parse
    waits: list[float] = []

    def record(self, files, **kwargs):  # noqa: ANN001, ANN003, ANN202
        waits.append(kwargs.get("wait_ready_s", READY_WAIT_S))
        return original(self, files, **kwargs)

    monkeypatch.setattr(Parser, "parse", record)
    for _ in range(4):  # each declares 7 more files: 30, 23, 16 and 9 are left to parse
        with _plan_waves(repo["kb"].ledger, ctx) as waves:
            waves.start_ahead()
            next(iter(waves))
    with _plan_waves(repo["kb"].ledger, ctx) as waves:
        next(iter(waves))  # not ahead: the lane has nothing else to do, no wait
    assert waits == [AHEAD_READY_WAIT_S] * 4 + [0.0]


def test_a_first_wave_that_fails_ahead_fails_the_sweep_when_it_is_taken(
    repo: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = repo["ctx"]

    def choke(self, files, **kwargs):  # noqa: ANN001, ANN003, ANN202
        raise ValueError("the parser choked")

    monkeypatch.setattr(Parser, "parse", choke)
    kb = repo["kb"]
    with _plan_waves(kb.ledger, ctx) as waves:
        waves.start_ahead()  # no exception here: it is the stage's, raised where it ran
        with pytest.raises(ChunkingFailed, match="the parser choked") as failed:
            _embed_in_waves(
                kb.store, kb.ledger, ctx, waves, EmbedContext(provider=HashingProvider())
            )
    assert failed.value.code == codes.PARSE_FAILED
    assert _declared(ctx) == set() and _rows(ctx) == {}


def test_closing_waves_started_ahead_waits_for_the_first_wave(
    repo: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep that stops before the embedding stage (a lost lease, a failure) closes the
    waves: the thread ahead finishes with the parser before the parser is closed."""
    ctx = repo["ctx"]
    original_parse, original_close = Parser.parse, Parser.close
    order: list[str] = []

    def slow(self, files, **kwargs):  # noqa: ANN001, ANN003, ANN202
        time.sleep(0.3)
        rows = original_parse(self, files, **kwargs)
        order.append("parsed")
        return rows

    def closing(self) -> None:  # noqa: ANN001
        order.append("closed")
        original_close(self)

    monkeypatch.setattr(Parser, "parse", slow)
    monkeypatch.setattr(Parser, "close", closing)
    waves = _plan_waves(repo["kb"].ledger, ctx)
    waves.start_ahead()
    waves.close()
    assert order == ["parsed", "closed"]
    assert len(_declared(ctx)) == PER_FILE * 7  # declared under the lease, kept
