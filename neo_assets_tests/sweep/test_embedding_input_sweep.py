"""Through real sweeps (real git repo, real Chroma): the provider receives the header
line, the stored document stays the chunk's content, and a change of input format is a
new generation that makes the repo due and re-embeds the rows already present."""

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from neo_assets.config.settings import load_settings
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.providers.hashing import HashingProvider
from neo_assets.embedding.rules import input as inputs
from neo_assets.generations.serving import configured_generation, generation_store
from neo_assets.sweep import due
from neo_assets.sweep.census import census_step
from neo_assets.sweep.chunk import chunk_step
from neo_assets.sweep.context import RepoContext
from neo_assets.sweep.embed import embed_step
from neo_assets.sweep.embed_plan import EmbedContext
from neo_assets.sweep.envelope import envelope_step
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import KbHandles
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

JS = """export default class Collection {
    doSort(a, b) {
        return a - b;
    }
}
"""


class Recording(HashingProvider):
    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    async def embed(
        self, texts: Sequence[str], cancel_scope: CancelScope, operation_label: str
    ) -> np.ndarray:
        self.texts.extend(texts)
        return await super().embed(texts, cancel_scope, operation_label)


def _ctx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str) -> RepoContext:
    repo = GitRepo(tmp_path / f"r{version}")
    repo.write("src/collection/Base.mjs", JS)
    repo.commit("one", when=1_700_000_000)
    tenants = write_tenants(
        tmp_path / "t.yaml", {"acme": [repo_entry("w", repo.path, version=version)]}
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    t = load_tenants(tenants).tenants[0]
    return RepoContext(tenant=t, repo=t.repos[0])


def _sweep(kb: KbHandles, ctx: RepoContext, provider: Recording) -> dict:
    settings = load_settings()
    now = time.time()
    env = envelope_step(ctx, settings, kb.ledger, now)
    chunks = chunk_step(ctx, settings, kb.ledger, env, now)
    summary = embed_step(
        ctx, settings, kb.store, kb.ledger, env, chunks, EmbedContext(provider=provider)
    )
    return census_step(ctx, settings, kb.ledger, env, summary, now).to_doc()


def _rows(kb: KbHandles, generation: str | None = None) -> dict[str, dict]:
    """The rows of ``generation``'s collection (the first generation's: the base one)."""
    store = (
        kb.store
        if generation is None
        else generation_store(load_settings(), kb.ledger, kb.store, generation)
    )
    ids = [r["id"] for r in store.tenant_rows("acme")]
    return {r["metadata"]["name"]: r for r in store.get_rows(ids, include_documents=True).values()}


def test_2x_units_are_embedded_with_a_header_and_stored_as_their_content(
    kb: KbHandles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = _ctx(tmp_path, monkeypatch, "2.0.0")
    provider = Recording()
    assert _sweep(kb, ctx, provider)["outcome"] == "complete"
    rows = _rows(kb)
    method = rows["Collection.doSort"]
    assert method["document"].startswith("    doSort(a, b) {") or method["document"].startswith(
        "doSort"
    )
    sent = {t.split("\n", 1)[0]: t for t in provider.texts}
    header = "method Collection.doSort"
    assert sent[header] == header + "\n" + method["document"]
    assert "class Collection" in sent


def test_1x_chunks_are_embedded_bare(
    kb: KbHandles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = _ctx(tmp_path, monkeypatch, "1.0.0")
    provider = Recording()
    assert _sweep(kb, ctx, provider)["outcome"] == "complete"
    assert sorted(provider.texts) == sorted(r["document"] for r in _rows(kb).values())


def test_a_format_change_is_a_new_generation_that_re_embeds_present_rows(
    kb: KbHandles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = _ctx(tmp_path, monkeypatch, "2.0.0")
    first = _sweep(kb, ctx, Recording())
    assert first["outcome"] == "complete"
    before = _rows(kb)
    settings = load_settings()
    assert due.evaluate([ctx], settings, kb.ledger, time.time())[0].reason is None

    monkeypatch.setattr(inputs, "EMBEDDING_INPUT_FORMAT", inputs.FORMAT_PLAIN)
    generation = configured_generation(load_settings())
    assert generation != first["embeddingGeneration"]
    # The due check computes the same generation: the repo is due again.
    assert due.evaluate([ctx], load_settings(), kb.ledger, time.time())[0].reason is not None

    provider = Recording()
    second = _sweep(kb, ctx, provider)
    assert second["outcome"] == "complete"
    assert second["embeddingGeneration"] == generation
    after = _rows(kb, generation)
    assert set(after) == set(before)
    # The new generation lives beside the old one, which stays whole until reclaimed.
    assert _rows(kb).keys() == before.keys()
    assert {r["metadata"]["embeddingGeneration"] for r in _rows(kb).values()} == {
        first["embeddingGeneration"]
    }
    # Every row was offered again, bare this time, and is stamped with the new generation.
    assert sorted(provider.texts) == sorted(r["document"] for r in after.values())
    assert {r["metadata"]["embeddingGeneration"] for r in after.values()} == {generation}
    assert second["counts"]["alreadyPresent"] == 0
    assert second["counts"]["embedded"] == len(after)

    # Settled at the new generation: the next sweep reads no stamps and embeds nothing.
    third = Recording()
    assert _sweep(kb, ctx, third)["outcome"] == "complete"
    assert third.texts == []
