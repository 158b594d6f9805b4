"""Issue 4 through the real sweep: a fenced repo completes, a broken one retries.

Every arm runs ``run_sweeps`` (a Dagster run of the sweep job, then the status job) over
a real git repo, the persistent Chroma under NEO_HOME and the fault-injecting
OpenAI-compatible server as the provider (``sweep_harness``). The outcome is read three
ways: what ``run_sweeps`` returned, the ledger's repo_state row, and the status snapshot
(in process, and from ``neo-assets status --json`` in a new process).

The server's markers make the faults: ``bad_request`` (a 400 for the chunk carrying it:
the lane isolates it and fences it proven-content-poison), ``kill`` (the server dies on
receipt: a death strike per sweep, undeliverable-at-geometry at the second), ``hang``
(past the call ceiling: a timeout strike, a live deferred row), ``too_large`` (the
server refuses the input for its size, as llama.cpp's 500 "input is too large": a size
refusal, fenced undeliverable-at-geometry, never poison). A chunk longer than the band
is split into parts that fit (never fenced); one the server's own smaller limit refuses
is fenced at the geometry, and a narrower band re-offers it as parts that get through.
"""

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as sa

from neo_assets.core import codes
from neo_assets.defs.partition_sync import apply_requests
from neo_assets.defs.resources import default_resources
from neo_assets.embedding.rules import lane_rows
from neo_assets.sweep.defs import sweep_sensor
from neo_assets.sweep.rules.censuses import CENSUS_MAX_IDS
from neo_assets.sweep.rules.fence_gate import fence_family, is_durable_fence
from neo_assets.sweep.rules.outcomes import PROVIDER_FAILURE_CODES
from neo_assets.sweep.rules.scheduling import DUE_GENERATION_CHANGED
from neo_assets_tests.fakes.fault_server import marker
from neo_assets_tests.fakes.fixtures import fault_server_fixture
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor
from neo_assets_tests.sweep_harness import (
    BACKOFF_CAP_MINUTES,
    BAND_CHARS,
    CADENCE_MINUTES,
    CONTEXT_TOKENS,
    DIMENSIONS,
    SLUG,
    TENANT,
    SweepEnv,
    text_file,
)

POISON = codes.DISPOSITION_PROVEN_CONTENT_POISON
UNDELIVERABLE = codes.DISPOSITION_UNDELIVERABLE_AT_GEOMETRY
FENCE_CODES = frozenset(
    {codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON, codes.KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY}
)
EMPTY = {"count": 0, "ids": []}
GOOD = text_file("def healthy():\n    return 'words the provider embeds'")
# Refused by the server for its size (its marker), whatever the band.
BIG = text_file(f"an input over this server's own limit {marker('too_large')}")
# Under the band (BAND_CHARS), over a server limit of SERVER_LIMIT_CHARS characters.
SERVER_LIMIT_CHARS = 400
WIDE = text_file("\n".join(f"line {i:02d} " + "y" * 20 for i in range(15)))

server_module = fault_server_fixture(scope="module", dimensions=DIMENSIONS)


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture
def server(server_module: FaultServerSupervisor) -> Iterator[FaultServerSupervisor]:
    server_module.reset()
    server_module.wait_idle(timeout_s=20)
    yield server_module
    server_module.reset()


@pytest.fixture
def make_env(
    neo_home: Path,
    tmp_path: Path,
    server: FaultServerSupervisor,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[[dict[str, str]], SweepEnv]]:
    made: list[SweepEnv] = []

    def make(files: dict[str, str]) -> SweepEnv:
        env = SweepEnv.create(tmp_path, server, files)
        for name, value in env.env_vars().items():
            monkeypatch.setenv(name, value)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


# ---------------------------------------------------------------------------- helpers
def census_of(ids: list[str]) -> dict[str, Any]:
    distinct = sorted(set(ids))
    return {"count": len(distinct), "ids": distinct[:CENSUS_MAX_IDS]}


def fence_rows(summary: dict[str, Any], family: str) -> dict[str, dict[str, Any]]:
    return {
        row["details"]["chunkId"]: row for row in summary["errors"] if fence_family(row) == family
    }


def live_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [row for row in summary["errors"] if not is_durable_fence(row)]


def assert_completed(env: SweepEnv, result: dict[str, Any], revision: str) -> None:
    """Complete, as the result, the ledger and the status snapshot all say."""
    assert result["outcome"] == codes.OUTCOME_COMPLETE, result
    assert result["deferredCauseCode"] is None
    assert result["consecutiveFailures"] == 0 and result["nextDueAt"] is None
    state = env.state()
    assert state["last_outcome"] == codes.OUTCOME_COMPLETE
    assert state["last_ingested_rev"] == revision == state["last_attempted_rev"]
    assert state["consecutive_failures"] == 0
    assert state["deferred_cause_code"] is None and state["next_due_at"] is None
    status = env.status()
    assert status["outcome"] == codes.OUTCOME_COMPLETE
    assert status["lastIngestedRev"] == revision
    assert status["nextDueAt"] is None and status["deferredCauseCode"] is None


def assert_deferred_by_live_row(env: SweepEnv, result: dict[str, Any]) -> dict[str, Any]:
    """Deferred, with a cause drawn from a live row of this sweep (never a fence row)."""
    assert result["outcome"] == codes.OUTCOME_DEFERRED, result
    summary = env.last_summary()
    cause = result["deferredCauseCode"]
    assert cause in {row["code"] for row in live_rows(summary)}
    state = env.state()
    assert state["last_outcome"] == codes.OUTCOME_DEFERRED
    assert state["deferred_cause_code"] == cause == env.status()["deferredCauseCode"]
    return summary


def tick(instance: dg.DagsterInstance, cursor: str | None) -> dg.SensorResult:
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources=default_resources()
    ) as context:
        result = sweep_sensor(context)
    apply_requests(instance, result.dynamic_partitions_requests)  # as the daemon does
    return result


def age_state(env: SweepEnv, seconds: float) -> None:
    """Move the last attempt ``seconds`` into the past: any backoff has long elapsed."""
    state = env.state()
    env.write_repo_state(
        last_attempt_at=state["last_attempt_at"] - seconds,
        next_due_at=None if state["next_due_at"] is None else state["next_due_at"] - seconds,
    )


# ---------------------------------------------------------------------------- content poison
def test_content_poison_only_completes_and_its_census_outlives_the_process(
    make_env: Callable[[dict[str, str]], SweepEnv],
) -> None:
    # 34 poisoned chunks (> the 32-id cap) beside one healthy chunk.
    poisoned = {
        f"poison/p{i:02d}.txt": text_file(f"bad {i} {marker('bad_request')}") for i in range(34)
    }
    env = make_env({"good.txt": GOOD, **poisoned})
    head = env.head()

    result = env.sweep()
    assert_completed(env, result, head)
    poison_ids = sorted(env.chunk_id(path) for path in poisoned)
    expected = census_of(poison_ids)
    assert expected["count"] == 34 and len(expected["ids"]) == CENSUS_MAX_IDS
    assert result["contentPoisonChunks"] == expected
    assert result["undeliverableChunks"] == EMPTY
    summary = env.last_summary()
    assert live_rows(summary) == []
    fenced = fence_rows(summary, POISON)
    assert sorted(fenced) == poison_ids
    assert all(row["details"]["recordedThisSweep"] is True for row in fenced.values())
    assert env.row_ids() == {env.chunk_id("good.txt")}
    # A fence never arms a recovery episode.
    assert env.state()["recovery_episode_opened_at"] is None

    # A new process (nothing cached) reads the same census from the ledger.
    cli = env.cli_status()
    assert cli["outcome"] == codes.OUTCOME_COMPLETE and cli["lastIngestedRev"] == head
    assert cli["contentPoisonChunks"] == expected
    assert cli["undeliverableChunks"] == EMPTY

    # A torn stored census reads back as null for that field only, never smaller.
    stored = env.state()["content_poison_census"]
    for torn in (
        stored[: len(stored) // 2],  # cut mid-write
        json.dumps({"count": 3, "ids": expected["ids"]}),  # count disagrees with the ids
        json.dumps({"count": 34, "ids": expected["ids"][::-1]}),  # unsorted
        json.dumps({"count": 34, "ids": expected["ids"][:31] + ["NOT-AN-ID"]}),
    ):
        env.write_repo_state(content_poison_census=torn)
        status = env.status()
        assert status["contentPoisonChunks"] is None, torn
        assert status["undeliverableChunks"] == EMPTY
        assert status["outcome"] == codes.OUTCOME_COMPLETE
    env.write_repo_state(content_poison_census=stored, undeliverable_census='{"count":')
    status = env.status()
    assert status["undeliverableChunks"] is None and status["contentPoisonChunks"] == expected

    # Nothing changed: the forced sweep completes again without a provider request, from
    # the fences recorded before, and rewrites both censuses whole.
    before = env.server.stats()
    again = env.sweep(force=True)
    assert_completed(env, again, head)
    assert env.server.stats()["requests_received"] == before["requests_received"]
    assert again["contentPoisonChunks"] == expected and again["undeliverableChunks"] == EMPTY
    refenced = fence_rows(env.last_summary(), POISON)
    assert sorted(refenced) == poison_ids
    assert all(row["details"]["recordedThisSweep"] is False for row in refenced.values())
    status = env.status()
    assert status["contentPoisonChunks"] == expected and status["undeliverableChunks"] == EMPTY
    assert env.state()["recovery_episode_opened_at"] is None


# ---------------------------------------------------------------------------- undeliverable
def test_undeliverable_only_completes_never_without_its_census_and_reverses_with_geometry(
    make_env: Callable[[dict[str, str]], SweepEnv], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert SERVER_LIMIT_CHARS < len(WIDE) < BAND_CHARS
    env = make_env({"good.txt": GOOD, "big.txt": WIDE})
    # The server takes fewer tokens than the band assumes (llama.cpp's -ub below the
    # configured NEO_EMBEDDING_CONTEXT_TOKENS): it refuses the chunk for its size.
    env.server.configure(too_large_over_chars=SERVER_LIMIT_CHARS)
    first = env.head()

    result = env.sweep()
    assert_completed(env, result, first)
    big = env.chunk_id("big.txt")
    assert result["undeliverableChunks"] == census_of([big])
    assert result["contentPoisonChunks"] == EMPTY
    (row,) = fence_rows(env.last_summary(), UNDELIVERABLE).values()
    assert row["details"]["evidenceCode"] == codes.KB_VECTOR_EMBED_INPUT_TOO_LARGE
    assert row["details"]["receipt"]["sizeRefusal"] is True
    # A size refusal is geometry: never a strike, never a cause, never an episode.
    assert env.ledger.strikes(TENANT, SLUG, env.generation()) == []
    assert env.row_ids() == {env.chunk_id("good.txt")}
    assert env.state()["recovery_episode_opened_at"] is None
    assert env.status()["undeliverableChunks"] == census_of([big])

    # The census is written with the checkpoint: a ledger that refuses the census write
    # refuses the completion too (the run fails; checkpoint and census stay as they were).
    second = env.commit({"more.txt": text_file("another healthy chunk")})
    with env.ledger.engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE TRIGGER refuse_census BEFORE UPDATE OF undeliverable_census "
                "ON repo_state BEGIN SELECT RAISE(ABORT, 'census write refused'); END"
            )
        )
    refused = env.sweep()
    assert refused["outcome"] == codes.OUTCOME_FAILED
    state = env.state()
    # The checkpoint holds; the crash itself is recorded as a failed attempt (so backoff
    # and the sensor's run key move on), and the census is the completed sweep's.
    assert state["last_ingested_rev"] == first and state["last_outcome"] == codes.OUTCOME_FAILED
    assert state["deferred_cause_code"] == codes.STORE_FAILED
    assert env.status()["undeliverableChunks"] == census_of([big])
    with env.ledger.engine.begin() as conn:
        conn.execute(sa.text("DROP TRIGGER refuse_census"))

    # The failed attempt was made at `second` and nothing moved since: not due, and said
    # so (failed, with its cause and retry time; no run).
    waiting = env.sweep()
    assert waiting["outcome"] == codes.OUTCOME_FAILED and "runId" not in waiting
    assert waiting["deferredCauseCode"] == codes.STORE_FAILED and waiting["retryAfter"]
    # Its backoff elapsed (the attempt moved into the past through the ledger): retried.
    row = env.state()
    back = row["next_due_at"] - row["last_attempt_at"] + 1.0
    env.ledger.upsert_repo_state(
        row["tenant_id"],
        row["repo_slug"],
        last_attempt_at=row["last_attempt_at"] - back,
        attempt_inputs_at=row["attempt_inputs_at"] - back,
    )
    landed = env.sweep()  # due: its backoff elapsed
    assert_completed(env, landed, second)
    assert landed["undeliverableChunks"] == census_of([big])

    # A band the server can take is a new embedding generation: the fence no longer
    # holds, the sensor sees the repo due, and the chunk is offered again, split into
    # parts that fit, and delivered whole in them.
    monkeypatch.setenv("NEO_EMBEDDING_CONTEXT_TOKENS", str(CONTEXT_TOKENS // 2))
    (request,) = tick(env.instance, None).run_requests
    assert request.tags["neo/due-reason"] == DUE_GENERATION_CHANGED
    narrowed = env.sweep()
    assert_completed(env, narrowed, second)
    assert narrowed["undeliverableChunks"] == EMPTY and narrowed["contentPoisonChunks"] == EMPTY
    parts = env.chunk_ids("big.txt")
    assert len(parts) == 2 and set(parts) <= env.row_ids()
    documents = env.store.get_rows(parts, include_documents=True)
    names = [documents[p]["metadata"]["name"] for p in parts]
    assert sorted(n.rsplit(" [", 1)[1] for n in names) == ["part 1/2]", "part 2/2]"]
    ordered = sorted(parts, key=lambda p: documents[p]["metadata"]["startLine"])
    assert "".join(documents[p]["document"] for p in ordered) == WIDE.rstrip("\n")


def test_a_band_over_the_servers_own_limit_fails_the_sweep_naming_the_setting(
    make_env: Callable[[dict[str, str]], SweepEnv],
) -> None:
    # llama.cpp says (GET /props) it takes fewer tokens per input than the band assumes:
    # a configuration error at first contact, named, before a single input is refused.
    env = make_env({"good.txt": GOOD})
    env.server.configure(props={"default_generation_settings": {"n_ctx": CONTEXT_TOKENS // 2}})
    before = env.server.stats()["requests_received"]
    try:
        result = env.sweep()
    finally:
        env.server.configure(props=None)
    assert result["outcome"] == codes.OUTCOME_FAILED
    assert result["deferredCauseCode"] == codes.KB_VECTOR_EMBED_BAND_OVER_PROVIDER_LIMIT
    message = json.loads(env.state()["last_summary"])["errors"][0]["message"]
    assert f"NEO_EMBEDDING_CONTEXT_TOKENS={CONTEXT_TOKENS}" in message
    assert f"set NEO_EMBEDDING_CONTEXT_TOKENS={CONTEXT_TOKENS // 2}" in message
    assert env.server.stats()["requests_received"] == before  # nothing sent, nothing fenced
    assert env.ledger.fences(TENANT, SLUG, env.generation()) == []


# ---------------------------------------------------------------------------- both families
def test_both_families_beside_a_live_failure_defer_then_complete_and_cost_no_runs(
    make_env: Callable[[dict[str, str]], SweepEnv],
) -> None:
    env = make_env(
        {
            "good.txt": GOOD,
            "poison.txt": text_file(f"bad content {marker('bad_request')}"),
            "big.txt": BIG,
            "dies.txt": text_file(f"this input kills the server {marker('kill')}"),
        }
    )
    head = env.head()

    # Sweep 1: the poison is proven, the big chunk fenced at the geometry, and the killer
    # takes its first death strike: a live row beside fences of both families.
    first = env.sweep()
    summary = assert_deferred_by_live_row(env, first)
    assert first["deferredCauseCode"] not in FENCE_CODES
    poison, big, dies = (env.chunk_id(p) for p in ("poison.txt", "big.txt", "dies.txt"))
    assert first["deferredCauseCode"] == codes.KB_VECTOR_EMBED_TRANSPORT_CLOSED
    assert set(fence_rows(summary, POISON)) == {poison}
    assert set(fence_rows(summary, UNDELIVERABLE)) == {big}
    (live,) = live_rows(summary)
    assert live["details"]["chunkIds"] == [dies]
    state = env.state()
    assert state["last_ingested_rev"] is None and state["consecutive_failures"] == 1
    assert first["contentPoisonChunks"] == census_of([poison])
    assert first["undeliverableChunks"] == census_of([big])
    # A provider-cause deferral arms a recovery episode.
    opened = state["recovery_episode_opened_at"]
    assert opened is not None

    # Sweep 2, nothing changed: the second death graduates the killer; only fences remain.
    second = env.sweep(force=True)
    assert_completed(env, second, head)
    summary = env.last_summary()
    assert live_rows(summary) == []
    assert second["contentPoisonChunks"] == census_of([poison])
    assert second["undeliverableChunks"] == census_of([big, dies])
    recorded = {
        cid: row["details"]["recordedThisSweep"]
        for family in (POISON, UNDELIVERABLE)
        for cid, row in fence_rows(summary, family).items()
    }
    assert recorded == {poison: False, big: False, dies: True}
    assert env.state()["recovery_episode_opened_at"] is None
    # The fence_census materialization shows the outcome and both censuses in the UI.
    event = env.instance.get_latest_materialization_event(dg.AssetKey("fence_census"))
    assert event is not None and event.asset_materialization is not None
    metadata = {k: v.value for k, v in event.asset_materialization.metadata.items()}
    assert metadata["outcome"] == codes.OUTCOME_COMPLETE
    assert metadata["content_poison_chunks"] == 1 and metadata["undeliverable_chunks"] == 2
    assert metadata["censuses"] == {
        "contentPoisonChunks": census_of([poison]),
        "undeliverableChunks": census_of([big, dies]),
        "secretChunks": {"count": 0, "ids": [], "locations": []},
    }

    # A day later, nothing changed: three sensor ticks launch nothing.
    age_state(env, 86_400)
    cursor = None
    for _ in range(3):
        quiet = tick(env.instance, cursor)
        assert quiet.run_requests == [] and quiet.dynamic_partitions_requests == []
        cursor = quiet.cursor
    # ...and the sensor does see a real change (the ticks above could have requested).
    env.commit({"hangs.txt": text_file(f"slow input {marker('hang', 6)}")})
    moved = tick(env.instance, cursor)
    assert [r.partition_key for r in moved.run_requests] == ["acme/widgets"]

    # Sweep 3: a live timeout beside fences of both families from earlier sweeps.
    third = env.sweep()
    summary = assert_deferred_by_live_row(env, third)
    assert third["deferredCauseCode"] not in FENCE_CODES
    assert third["deferredCauseCode"] == codes.KB_VECTOR_EMBED_TIMEOUT
    assert set(fence_rows(summary, POISON)) == {poison}
    assert set(fence_rows(summary, UNDELIVERABLE)) == {big, dies}
    assert all(
        row["details"]["recordedThisSweep"] is False
        for row in summary["errors"]
        if is_durable_fence(row)
    )
    state = env.state()
    assert state["last_ingested_rev"] == head  # held
    assert state["recovery_episode_opened_at"] is not None
    status = env.status()
    assert status["contentPoisonChunks"] == census_of([poison])
    assert status["undeliverableChunks"] == census_of([big, dies])


# ---------------------------------------------------------------------------- malformed fences
def _edit(**changes: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def mutate(row: dict[str, Any]) -> dict[str, Any]:
        details = dict(row["details"])
        for key, value in changes.items():
            if value is _DROP:
                details.pop(key)
            elif callable(value):
                details[key] = value(details[key])
            else:
                details[key] = value
        return {**row, "details": details}

    return mutate


_DROP = object()
MALFORMED: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "missing disposition": _edit(disposition=_DROP),
    "non-string disposition": _edit(disposition=[POISON]),
    "unknown disposition": _edit(disposition="content-poison"),
    "reasonCode != code": _edit(reasonCode=codes.KB_VECTOR_EMBED_TIMEOUT),
    "bad chunk id": _edit(chunkId=str.upper),
}


def test_each_malformed_fence_defers_exactly_as_a_live_row(
    make_env: Callable[[dict[str, str]], SweepEnv], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lane's reader of stored fences is wrapped so that ONE chunk's fence row comes
    out malformed, as a foreign or buggy writer would emit it, beside well-formed fences of
    both families. (Torn records in the ledger never reach the gate: the lane re-offers
    their chunks; see the next two tests.) Each variant must defer by the row's own code,
    exactly as the plain live row it is, and never complete."""
    env = make_env(
        {
            "good.txt": GOOD,
            "malformed.txt": text_file(f"bad one {marker('bad_request')}"),
            "poison.txt": text_file(f"bad two {marker('bad_request')}"),
            "big.txt": BIG,
        }
    )
    first = env.head()
    assert_completed(env, env.sweep(), first)
    malformed, poison, big = (env.chunk_id(p) for p in ("malformed.txt", "poison.txt", "big.txt"))
    second = env.commit({"more.txt": text_file("more healthy words")})

    real = lane_rows.fence_row_from_record
    decided: list[tuple[Any, ...]] = []
    for failures, (name, mutate) in enumerate(MALFORMED.items(), start=1):

        def reader(record: Any, *, recorded_this_sweep: bool, mutate: Any = mutate) -> Any:
            row = real(record, recorded_this_sweep=recorded_this_sweep)
            return mutate(row) if record.chunk_id == malformed else row

        monkeypatch.setattr(lane_rows, "fence_row_from_record", reader)
        result = env.sweep(force=True)
        summary = assert_deferred_by_live_row(env, result)
        (row,) = live_rows(summary)
        assert row["code"] == codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON, name
        state = env.state()
        assert state["consecutive_failures"] == failures, name
        decided.append(
            (
                name,
                result["outcome"],
                result["deferredCauseCode"],
                state["last_ingested_rev"],
                state["last_attempted_rev"],
                state["recovery_episode_opened_at"],
                result["contentPoisonChunks"],
                result["undeliverableChunks"],
            )
        )
    # What a plain live row with that code decides: deferred by its code, the checkpoint
    # held at the first revision, no recovery episode (not a provider failure, and the
    # fences beside it arm none), and the censuses keep the well-formed fences only.
    assert decided == [
        (
            name,
            codes.OUTCOME_DEFERRED,
            codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON,
            first,
            second,
            None,
            census_of([poison]),
            census_of([big]),
        )
        for name in MALFORMED
    ]


def test_torn_fence_records_in_the_ledger_are_not_fences(
    make_env: Callable[[dict[str, str]], SweepEnv],
) -> None:
    """Fence records written straight into the ledger, as a corrupted or foreign record:
    the lane does not read them as fences, so their chunks are offered again. Healthy ones
    are embedded; a really poisoned one is proven again and its record rewritten whole."""
    files = {f"g{i}.txt": text_file(f"healthy chunk number {i}") for i in range(4)}
    files["poison.txt"] = text_file(f"bad {marker('bad_request')}")
    env = make_env(files)
    ids = {path: env.parsed_chunk_id(path) for path in files}
    env.insert_fence_record(ids["g0.txt"], disposition="content-poison", reason_code="X")
    env.insert_fence_record(
        ids["g1.txt"], disposition="", reason_code=codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON
    )
    env.insert_fence_record(  # a BLOB in the text column: not a string when read
        ids["g2.txt"],
        disposition=POISON.encode(),
        reason_code=codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON,
    )
    env.insert_fence_record(  # a well-formed record under a malformed chunk id
        ids["g3.txt"].upper(),
        disposition=POISON,
        reason_code=codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON,
    )
    env.insert_fence_record(ids["poison.txt"], disposition="quarantined", reason_code="X")
    hits = env.server.stats().get("marker_hits", {}).get("bad_request", 0)

    result = env.sweep()
    assert_completed(env, result, env.head())
    assert {ids[f"g{i}.txt"] for i in range(4)} <= env.row_ids()
    assert result["contentPoisonChunks"] == census_of([ids["poison.txt"]])
    assert result["undeliverableChunks"] == EMPTY
    (row,) = env.last_summary()["errors"]
    assert row["details"]["chunkId"] == ids["poison.txt"]
    assert row["details"]["recordedThisSweep"] is True  # proven again, not trusted
    assert env.server.stats()["marker_hits"]["bad_request"] > hits
    records = env.fence_records()
    assert records[ids["poison.txt"]]["disposition"] == POISON
    assert records[ids["poison.txt"]]["reason_code"] == codes.KB_VECTOR_EMBED_PROVEN_CONTENT_POISON


def test_a_stored_fence_with_an_incoherent_reason_code_is_not_a_fence(
    make_env: Callable[[dict[str, str]], SweepEnv],
) -> None:
    env = make_env({"good.txt": GOOD, "other.txt": text_file("another healthy chunk")})
    good = env.parsed_chunk_id("good.txt")
    # Poison "proven" by a timeout: not this contract's writer (a timeout never poisons).
    env.insert_fence_record(
        good,
        disposition=POISON,
        reason_code=codes.KB_VECTOR_EMBED_TIMEOUT,
        receipt=json.dumps({"evidenceCode": codes.KB_VECTOR_EMBED_TIMEOUT}),
    )
    result = env.sweep()
    assert result["contentPoisonChunks"] == EMPTY
    assert good in env.row_ids()


# ---------------------------------------------------------------------------- backoff
def test_backoff_doubles_per_deferral_up_to_the_cap_and_a_success_resets_it(
    make_env: Callable[[dict[str, str]], SweepEnv], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_env({"good.txt": GOOD, "other.txt": text_file("another healthy chunk")})
    monkeypatch.setenv("NEO_EMBEDDING_RECOVERY_MAX_WAIT_S", "0.3")
    # A port refused before the provider answered is waited for apart (a server starting).
    monkeypatch.setenv("NEO_EMBEDDING_UNREACHABLE_WAIT_S", "0.3")
    env.server.refuse()
    cadence, cap = 60.0 * CADENCE_MINUTES, 60.0 * BACKOFF_CAP_MINUTES
    expected = [min(cadence * 2**n, cap) for n in (1, 2, 3)]
    assert expected == [120.0, 240.0, 300.0]  # doubles, then the cap holds it

    gaps, opened = [], None
    for n in range(1, 4):
        result = env.sweep(force=n > 1)
        assert_deferred_by_live_row(env, result)
        assert result["deferredCauseCode"] in PROVIDER_FAILURE_CODES
        state, status = env.state(), env.status()
        assert state["consecutive_failures"] == n == status["consecutiveFailures"]
        assert state["last_ingested_rev"] is None
        gap = state["next_due_at"] - state["last_attempt_at"]
        assert status["nextDueAt"] - status["lastAttemptAt"] == pytest.approx(gap)
        assert result["nextDueAt"] == pytest.approx(state["next_due_at"])
        gaps.append(gap)
        # The provider cause armed one episode at the first deferral; later ones keep it.
        opened = opened or state["recovery_episode_opened_at"]
        assert opened is not None and state["recovery_episode_opened_at"] == opened
    assert gaps == pytest.approx(expected)

    env.server.resume()
    done = env.sweep(force=True)
    assert_completed(env, done, env.head())
    assert env.state()["recovery_episode_opened_at"] is None
    assert env.status()["consecutiveFailures"] == 0
