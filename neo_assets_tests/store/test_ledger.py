"""The ledger on a real SQLite file: migrations, versions, generations, fences, state."""

import threading
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa

from neo_assets.sources.rules.chunks import DeclaredChunk
from neo_assets.store.ledger import Ledger


def _ledger(tmp_path: Path) -> Ledger:
    return Ledger.open(f"sqlite:///{tmp_path / 'ledger.sqlite'}")


def test_migrations_are_idempotent_and_create_every_table(tmp_path: Path) -> None:
    first = _ledger(tmp_path)
    first.dispose()
    second = _ledger(tmp_path)  # upgrading an up-to-date schema changes nothing
    names = set(sa.inspect(second.engine).get_table_names())
    assert {"alembic_version", "repo_state", "fences", "strikes", "declared_chunks"} <= names
    with second.engine.connect() as conn:
        assert conn.execute(sa.text("select version_num from alembic_version")).scalar()


def test_config_version_starts_at_one_and_grows_on_change(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    assert ledger.current_config_version("acme") is None
    assert ledger.config_version("acme", "d1", 1.0) == 1
    assert ledger.config_version("acme", "d1", 2.0) == 1
    assert ledger.config_version("acme", "d2", 3.0) == 2
    assert ledger.config_version("other", "d2", 3.0) == 1
    assert ledger.current_config_version("acme") == 2


def test_config_version_moves_by_one_exactly_when_the_declaration_changes(tmp_path: Path) -> None:
    """Going back to an earlier declaration is a change like any other: versions only grow."""
    ledger = _ledger(tmp_path)
    loads = ["a", "a", "b", "a", "a", "c", "b", "b"]
    got = [ledger.config_version("acme", digest, float(i)) for i, digest in enumerate(loads)]
    assert got == [1, 1, 2, 3, 3, 4, 5, 5]
    assert ledger.current_config_version("acme") == 5


def test_declared_generation_is_replaced_whole(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    common = dict(parser_id="neo-code", declaration_digest="x" * 64, now=1.0)
    ledger.record_generation(
        "acme",
        "w",
        revision="r1",
        parser_version="1.0.0",
        chunks=[
            DeclaredChunk("a" * 64, "a.py", "function", "f"),
            DeclaredChunk("b" * 64, "b.py", "module", "b"),
        ],
        **common,
    )
    ledger.record_generation(
        "acme",
        "w",
        revision="r2",
        parser_version="1.1.0",
        chunks=[DeclaredChunk("c" * 64, "a.py", "function", "f")],
        **common,
    )
    gen = ledger.declared_generation("acme", "w")
    assert gen is not None and gen["revision"] == "r2" and gen["parser_version"] == "1.1.0"
    assert [c.chunk_id for c in ledger.declared_chunks("acme", "w")] == ["c" * 64]
    assert ledger.declared_chunks("other", "w") == []


def test_fences_and_strikes_belong_to_a_generation(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    ledger.record_fence(
        "acme",
        "w",
        "g1",
        "a" * 64,
        disposition="proven-content-poison",
        reason_code="KB_VECTOR_EMBED_PROVEN_CONTENT_POISON",
        receipt={"n": 1},
        observed_at=5.0,
    )
    ledger.record_strike("acme", "w", "g1", "b" * 64, kind="death", count=1, receipt={}, now=5.0)
    ledger.record_strike("acme", "w", "g1", "b" * 64, kind="death", count=2, receipt={}, now=6.0)
    assert [f["chunk_id"] for f in ledger.fences("acme", "w", "g1")] == ["a" * 64]
    assert ledger.fences("acme", "w", "g2") == []
    assert ledger.fences("other", "w", "g1") == []
    strikes = ledger.strikes("acme", "w", "g1")
    assert [(s["chunk_id"], s["count"]) for s in strikes] == [("b" * 64, 2)]
    assert ledger.fences("acme", "w", "g1")[0]["receipt"] == {"n": 1}


def test_sweep_result_survives_reopen(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    ledger.record_sweep_result(
        "acme",
        "w",
        state={
            "last_outcome": "complete",
            "last_ingested_rev": "r1",
            "consecutive_failures": 0,
            "content_poison_census": '{"count":0,"ids":[]}',
        },
    )
    ledger.dispose()
    again = _ledger(tmp_path)
    row = again.repo_state("acme", "w")
    assert row is not None
    assert row["last_outcome"] == "complete" and row["last_ingested_rev"] == "r1"
    assert again.repo_state("acme", "other") is None


def test_a_ledger_migrated_before_the_reuse_columns_gets_them_and_works(tmp_path: Path) -> None:
    """The upgrade path that broke `neo-assets sweep` on a ledger made before the columns
    for reuse by blob existed (0001 builds its tables from the live schema)."""
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    Ledger.open(url).dispose()
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # what such a ledger looked like: at 0004, no columns
        conn.execute(sa.text("alter table declared_generations drop column chunking"))
        conn.execute(sa.text("drop index ix_declared_chunks_path"))
        conn.execute(sa.text("alter table declared_chunks drop column blob"))
        conn.execute(
            sa.text(
                "create index ix_declared_chunks_path on declared_chunks "
                "(tenant_id, repo_slug, source_path)"
            )
        )
        conn.execute(sa.text("update alembic_version set version_num = '0004'"))
    engine.dispose()

    ledger = Ledger.open(url)
    try:
        ledger.record_generation(
            "acme",
            "widgets",
            revision="r1",
            parser_id="neo-code",
            parser_version="1.0.0",
            declaration_digest="d",
            chunks=[DeclaredChunk("a" * 64, "a.py", "function", "f", "b" * 40)],
            now=1.0,
            chunking="neo-code@1.0.0:x",
        )
        assert ledger.declared_generation("acme", "widgets")["chunking"] == "neo-code@1.0.0:x"
        assert ledger.declared_chunks("acme", "widgets")[0].blob == "b" * 40
        with ledger.engine.connect() as conn:
            version = conn.execute(sa.text("select version_num from alembic_version")).scalar()
        assert version == "0019"  # 0019_parser_serving, the head
    finally:
        ledger.dispose()


def test_a_ledger_migrated_before_the_envelope_rules_gets_them(tmp_path: Path) -> None:
    """0006 on a ledger at 0005 without the column: its envelopes read with no rules
    (so the next sweep lists the tree) and new ones record theirs."""
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    ledger = Ledger.open(url)
    entry = {"path": "a.py", "yielded": True, "blob": "b" * 40, "size": 6}
    ledger.record_envelope("acme", "w", revision="r1", kind="git", entries=[entry], now=1.0)
    ledger.dispose()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("alter table envelopes drop column rules"))
        conn.execute(sa.text("update alembic_version set version_num = '0005'"))
    engine.dispose()

    ledger = Ledger.open(url)
    try:
        assert ledger.envelope("acme", "w")["rules"] == ""
        ledger.touch_envelope("acme", "w", now=2.0, rules="d" * 64)
        assert ledger.envelope("acme", "w")["rules"] == "d" * 64
        ledger.touch_envelope("acme", "w", now=3.0)  # time only: the rules stay
        head = ledger.envelope("acme", "w")
        assert (head["rules"], head["recorded_at"]) == ("d" * 64, 3.0)
        ledger.record_envelope(
            "acme", "w", revision="r2", kind="git", entries=[entry], now=4.0, rules="e" * 64
        )
        assert ledger.envelope("acme", "w")["rules"] == "e" * 64
    finally:
        ledger.dispose()


def config_versions_at_once(url: str, digests: list[str]) -> list[int]:
    """One thread per digest, each with its own ledger (engine), asks for its configVersion
    at the same instant; the versions they got, in order."""
    ledgers = [Ledger.open(url) for _ in digests]
    start = threading.Barrier(len(digests))
    got: list[int | BaseException] = [0] * len(digests)

    def ask(i: int) -> None:
        start.wait()
        try:
            got[i] = ledgers[i].config_version("acme", digests[i], now=1.0 + i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            got[i] = exc

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(digests))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for ledger in ledgers:
        ledger.dispose()
    errors = [g for g in got if isinstance(g, BaseException)]
    assert not errors, errors
    return [int(g) for g in got]  # type: ignore[arg-type]


def check_config_versions_at_once(url_for: Callable[[int], str]) -> None:
    for trial in range(5):
        # The same new config seen by many sweeps at once: one version for all of them.
        assert set(config_versions_at_once(url_for(2 * trial), ["d1"] * 6)) == {1}
        # Different configs at once: each its own version, none lost, none twice.
        got = config_versions_at_once(url_for(2 * trial + 1), [f"d{i}" for i in range(6)])
        assert sorted(got) == [1, 2, 3, 4, 5, 6]


def test_config_versions_asked_at_once_are_one_per_digest_on_sqlite(tmp_path: Path) -> None:
    check_config_versions_at_once(lambda n: f"sqlite:///{tmp_path / f'ledger{n}.sqlite'}")


def test_envelope_rows_are_the_recorded_envelope_as_tuples(tmp_path: Path) -> None:
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'l.sqlite'}")
    try:
        assert ledger.envelope_rows("acme", "w") is None
        entries = [
            {"path": "b.py", "yielded": True, "blob": "b" * 40, "size": 6, "changed_at": 5.0},
            {
                "path": "a.bin",
                "yielded": False,
                "blob": "a" * 40,
                "size": 9,
                "skip_reason": "binary",
            },
            {"path": "c.py", "yielded": True, "blob": "c" * 40, "size": 0},
        ]
        ledger.record_envelope(
            "acme", "w", revision="r1", kind="git", entries=entries, now=1.0, rules="d" * 64
        )
        ledger.record_envelope(
            "acme", "other", revision="r9", kind="git", entries=entries[:1], now=1.0
        )
        head, rows = ledger.envelope_rows("acme", "w")
        full = ledger.envelope("acme", "w")
        assert {k: head[k] for k in ("revision", "kind", "rules")} == {
            "revision": "r1",
            "kind": "git",
            "rules": "d" * 64,
        }
        keys = ("path", "size", "blob", "yielded", "skip_reason", "changed_at")
        assert sorted(rows) == sorted(tuple(p[k] for k in keys) for p in full["paths"])
        assert sorted(rows) == [
            ("a.bin", 9, "a" * 40, False, "binary", None),
            ("b.py", 6, "b" * 40, True, None, 5.0),
            ("c.py", 0, "c" * 40, True, None, None),
        ]
    finally:
        ledger.dispose()


def test_an_envelope_recorded_by_its_changes_equals_one_recorded_whole(tmp_path: Path) -> None:
    def entry(path: str, blob: str, **more) -> dict:  # noqa: ANN003
        return {"path": path, "yielded": True, "blob": blob * 40, "size": 3, **more}

    first = [entry(f"f{i:04d}.py", "a") for i in range(1200)]  # more than a DELETE batch
    second = [e for e in first if e["path"] not in {"f0001.py", "f0700.py"}]
    second[0] = entry("f0000.py", "b", changed_at=9.0)  # changed
    second.append(entry("new.py", "c"))  # added
    changed = [second[0], second[-1]]
    whole, delta = (Ledger.open(f"sqlite:///{tmp_path / n}.sqlite") for n in ("whole", "delta"))
    try:
        for ledger in (whole, delta):
            ledger.record_envelope("acme", "w", revision="r1", kind="git", entries=first, now=1.0)
            ledger.record_envelope("acme", "x", revision="r1", kind="git", entries=first, now=1.0)
        whole.record_envelope(
            "acme", "w", revision="r2", kind="git", entries=second, now=2.0, rules="d" * 64
        )
        delta.record_envelope(
            "acme",
            "w",
            revision="r2",
            kind="git",
            entries=changed,
            now=2.0,
            rules="d" * 64,
            replacing=["f0000.py", "f0001.py", "f0700.py"],
        )
        assert delta.envelope_rows("acme", "w") == whole.envelope_rows("acme", "w")
        head, rows = delta.envelope_rows("acme", "w")
        assert (head["revision"], head["rules"], len(rows)) == ("r2", "d" * 64, 1199)
        assert delta.envelope_rows("acme", "x") == whole.envelope_rows("acme", "x")  # untouched
    finally:
        whole.dispose()
        delta.dispose()


def test_a_ledger_migrated_before_the_attempt_inputs_column_gets_it(tmp_path: Path) -> None:
    """0007 on a ledger at 0006 without the column: a failed repo recorded by the old
    code (its inputs those of an older sweep) reads as unobserved, never as compared."""
    from neo_assets.sweep.repo_state import repo_state_from_row
    from neo_assets.sweep.rules.scheduling import DUE_STATE_UNOBSERVED, Observed, due_reason

    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    Ledger.open(url).dispose()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("alter table repo_state drop column attempt_inputs_at"))
        conn.execute(sa.text("update alembic_version set version_num = '0006'"))
        conn.execute(
            sa.text(
                "insert into repo_state (tenant_id, repo_slug, last_outcome, "
                "consecutive_failures, last_attempt_at, last_attempted_rev, "
                "declaration_digest, embedding_generation) "
                "values ('acme', 'w', 'failed', 1, 100.0, 'r1', 'old-decl', 'g')"
            )
        )
    engine.dispose()

    ledger = Ledger.open(url)
    try:
        row = ledger.repo_state("acme", "w")
        assert row is not None and row["attempt_inputs_at"] is None
        observed = Observed(
            repo_key="acme/w",
            cadence_seconds=60.0,
            current_revision="r1",
            declaration_digest="old-decl",
            embedding_generation="g",
        )
        assert due_reason(repo_state_from_row(row), observed, 101.0) == DUE_STATE_UNOBSERVED
        ledger.upsert_repo_state("acme", "w", attempt_inputs_at=100.0)
        assert (
            due_reason(repo_state_from_row(ledger.repo_state("acme", "w")), observed, 101.0) is None
        )
    finally:
        ledger.dispose()


def ledger_before(tmp_path: Path, table: str, version: str) -> str:
    """A ledger as a release at ``version`` left it: one config version recorded, and
    ``table`` (which a later migration adds) not there yet."""
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    ledger = Ledger.open(url)
    ledger.config_version("acme", "d1", 1.0)
    ledger.dispose()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(f"drop table {table}"))
        conn.execute(sa.text(f"update alembic_version set version_num = '{version}'"))
    engine.dispose()
    return url


def test_a_ledger_at_0009_gets_the_provider_work_table(tmp_path: Path) -> None:
    """0010_provider_work on a ledger at 0009: provider_work is added and works."""
    url = ledger_before(tmp_path, "provider_work", "0009")
    ledger = Ledger.open(url)
    try:
        assert ledger.current_config_version("acme") == 1
        assert "provider_work" in sa.inspect(ledger.engine).get_table_names()
        with ledger.engine.begin() as conn:
            conn.execute(sa.text("insert into provider_work values ('k', 3)"))
            assert conn.execute(sa.text("select abandoned from provider_work")).scalar() == 3
    finally:
        ledger.dispose()


def test_a_ledger_at_0007_gets_the_token_table_and_keeps_its_records(tmp_path: Path) -> None:
    """0008_generations, 0009_tokens on a ledger at 0007: api_tokens is added (if missing),
    nothing else changes, and tokens can be issued, read and revoked."""
    from neo_assets.serve.tokens import issue_token, list_tokens, revoke_token, token_record

    url = ledger_before(tmp_path, "api_tokens", "0007")
    ledger = Ledger.open(url)
    try:
        assert ledger.current_config_version("acme") == 1
        record, token = issue_token(ledger, "acme", ["widgets"], "agent", 5.0)
        stored = token_record(ledger, record.id)
        assert stored is not None and stored.repos == ("widgets",) and stored.tenant_id == "acme"
        with ledger.engine.connect() as conn:
            raw = conn.execute(sa.text("select * from api_tokens")).mappings().all()
        assert token not in str(raw) and raw[0]["token_hash"] == stored.token_hash
        assert revoke_token(ledger, record.id, 6.0) and revoke_token(ledger, record.id, 7.0)
        assert [r.revoked_at for r in list_tokens(ledger)] == [6.0]
        assert not revoke_token(ledger, "0" * 16, 8.0)
    finally:
        ledger.dispose()


def test_a_generation_recorded_by_two_sweeps_at_once_is_recorded_once(tmp_path: Path) -> None:
    """Sweeps of a first run go in parallel: each records the generation before writing;
    the one that loses the insert updates instead of failing its sweep."""
    import threading

    from neo_assets.generations.records import generation_records, register_generation

    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    Ledger.open(url).dispose()
    ledgers = [Ledger.open(url) for _ in range(4)]
    start = threading.Barrier(len(ledgers))
    errors: list[BaseException] = []

    def record(ledger: Ledger) -> None:
        start.wait()
        try:
            register_generation(
                ledger,
                "g1",
                collection_name="kb-g1",
                provider="hashing",
                model="m",
                base_url=None,
                dimensions=384,
                now=1.0,
            )
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=record, args=(lg,)) for lg in ledgers]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    try:
        assert errors == []
        [record_] = generation_records(ledgers[0]).values()
        assert record_.collection_name is None  # the knowledge base's first generation
    finally:
        for lg in ledgers:
            lg.dispose()


def test_a_ledger_at_0010_gets_the_batch_cap_table_and_remembers_a_cap(tmp_path: Path) -> None:
    """0011_provider_batch_caps on a ledger at 0010: provider_batch_caps is added (if
    missing); a cap is kept per provider (kind, base URL, model) with its evidence, and a
    later one replaces it."""
    from neo_assets.store.batch_caps import provider_batch_cap, record_batch_cap

    url = ledger_before(tmp_path, "provider_batch_caps", "0010")
    ledger = Ledger.open(url)
    try:
        assert ledger.current_config_version("acme") == 1
        tei = ("openai_compatible", "http://127.0.0.1:8080/", "bge")
        assert provider_batch_cap(ledger, *tei) is None
        record_batch_cap(
            ledger, *tei, cap=32, evidence="batch size 64 > maximum allowed batch size 32", now=5.0
        )
        got = provider_batch_cap(ledger, "openai_compatible", "http://127.0.0.1:8080", "bge")
        assert got is not None and (got.cap, got.learned_at) == (32, 5.0)
        assert "maximum allowed batch size 32" in got.evidence
        assert (
            provider_batch_cap(ledger, "openai_compatible", "http://127.0.0.1:8080", "e5") is None
        )
        record_batch_cap(
            ledger, *tei, cap=16, evidence="batch size 32 > maximum allowed batch size 16", now=9.0
        )
        got = provider_batch_cap(ledger, *tei)
        assert got is not None and (got.cap, got.learned_at) == (16, 9.0)
    finally:
        ledger.dispose()
