"""The sweep's prelude: the store's listing starts at once when a generation is recorded
(it overlaps the envelope), and only once the envelope is read on a first sweep; the
recorded generation is read once and handed to the chunk plan."""

import threading
from pathlib import Path

import pytest

from neo_assets.concurrency.prelude import SweepPrelude
from neo_assets.config.settings import load_settings
from neo_assets.config.tenants import load_tenants
from neo_assets.embedding.providers.hashing import HashingProvider
from neo_assets.services.sweep.steps import RepoContext, chunking_identity
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import DeclaredChunk
from neo_assets_tests.kb_handles import KbHandles
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


@pytest.fixture
def ctx(neo_home: Path, tmp_path: Path) -> RepoContext:
    (tmp_path / "r").mkdir()
    tenants = write_tenants(tmp_path / "t.yaml", {"acme": [repo_entry("w", tmp_path / "r")]})
    t = load_tenants(tenants).tenants[0]
    return RepoContext(tenant=t, repo=t.repos[0])


def _opening(kb: KbHandles, opened: list[str], event: threading.Event | None = None):  # noqa: ANN202
    def open_store() -> ChromaStore:
        opened.append(threading.current_thread().name)
        if event is not None:
            event.set()
        return kb.store

    return open_store


def test_a_first_sweep_opens_the_store_only_once_its_envelope_is_read(
    ctx: RepoContext, kb: KbHandles
) -> None:
    settings, opened = load_settings(), []
    ledger = kb.ledger
    prelude = SweepPrelude(ctx, settings, ledger, HashingProvider(), _opening(kb, opened))
    assert prelude.recorded.by_path == {} and opened == []
    presence = prelude.envelope_read()
    assert presence.store() is kb.store
    assert opened == ["neo-early-presence"] and prelude.envelope_read() is presence
    prelude.close()


def test_a_recorded_generation_is_read_once_and_listed_before_the_envelope(
    ctx: RepoContext, kb: KbHandles
) -> None:
    settings, opened = load_settings(), []
    ledger = kb.ledger
    chunk = DeclaredChunk("a" * 64, "a.py", "function", "f", "b" * 40)
    ledger.record_generation(
        "acme",
        "w",
        revision="r1",
        parser_id=ctx.repo.parser.id,
        parser_version=ctx.repo.parser.version,
        declaration_digest="d",
        chunks=[chunk],
        now=1.0,
        chunking=chunking_identity(ctx, settings),
    )
    started = threading.Event()
    prelude = SweepPrelude(ctx, settings, ledger, HashingProvider(), _opening(kb, opened, started))
    assert prelude.recorded.by_path == {"a.py": [chunk]}
    assert started.wait(30)  # opened on the prelude's thread, before any envelope
    assert opened == ["neo-early-presence"]
    presence = prelude.envelope_read()
    assert presence.present_ids([chunk.chunk_id]) == set()  # listed: no such row
    prelude.close()
