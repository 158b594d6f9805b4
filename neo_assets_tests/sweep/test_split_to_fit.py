"""Split to fit, through the sweep's steps with the bundled model (256 word pieces):
a chunk over the band is split into parts that each fit, stored whole across them with
their own ids, names and lines, and nothing is fenced."""

import re
import time
from pathlib import Path

import pytest

from neo_assets.config.settings import load_settings
from neo_assets.core.ids.chunk_ids import chunk_id, part_chunk_id
from neo_assets.embedding.band import band_for
from neo_assets.embedding.providers.sentence_transformers import (
    SentenceTransformersProvider,
    count_tokens,
)
from neo_assets.embedding.rules.input import embedding_input
from neo_assets.sweep.census import census_step
from neo_assets.sweep.chunk import chunk_step
from neo_assets.sweep.context import RepoContext
from neo_assets.sweep.embed import embed_step
from neo_assets.sweep.embed_plan import EmbedContext
from neo_assets.sweep.envelope import envelope_step
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.extras import require_sentence_transformers
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import KbHandles
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


@pytest.fixture(autouse=True)
def _needs_the_extra() -> None:
    require_sentence_transformers()


# One function of ~1,100 word pieces: four times the model's window.
BODY = "\n".join(
    f"    total_{i} = compute_value(records[{i}], scale={i}, offset=base_offset + {i})"
    for i in range(40)
)
LONG = f"def summarise(records, base_offset):\n{BODY}\n    return total_0\n"
SHORT = "def tiny():\n    return 1\n"
PART = re.compile(r"^summarise \[part (\d+)/(\d+)\]$")


def _ctx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RepoContext:
    repo = GitRepo(tmp_path / "r")
    repo.write("pkg/long.py", LONG + "\n\n" + SHORT)
    repo.commit("one", when=1_700_000_000)
    tenants = write_tenants(
        tmp_path / "t.yaml", {"acme": [repo_entry("w", repo.path, version="2.0.0")]}
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    monkeypatch.setenv("NEO_EMBEDDING_PROVIDER", "sentence_transformers")
    monkeypatch.setenv("NEO_EMBEDDING_DIMENSIONS", "384")
    t = load_tenants(tenants).tenants[0]
    return RepoContext(tenant=t, repo=t.repos[0])


def _sweep(kb: KbHandles, ctx: RepoContext) -> dict:
    settings = load_settings()
    now = time.time()
    env = envelope_step(ctx, settings, kb.ledger, now)
    chunks = chunk_step(ctx, settings, kb.ledger, env, now)
    provider = SentenceTransformersProvider(dimensions=384)
    summary = embed_step(
        ctx, settings, kb.store, kb.ledger, env, chunks, EmbedContext(provider=provider)
    )
    doc = census_step(ctx, settings, kb.ledger, env, summary, now).to_doc()
    return {"doc": doc, "summary": summary}


def test_the_band_is_the_models_own_window_counted_by_its_tokenizer(
    neo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEO_EMBEDDING_PROVIDER", "sentence_transformers")
    band = band_for(load_settings())
    assert (band.limit_tokens, band.tokens, band.exact) == (256, 256, True)
    assert band.count(["def f(): pass"]) == count_tokens(None, ["def f(): pass"])
    # An explicit NEO_EMBEDDING_CONTEXT_TOKENS can only narrow the model's own limit.
    monkeypatch.setenv("NEO_EMBEDDING_CONTEXT_TOKENS", "128")
    assert band_for(load_settings()).tokens == 128
    monkeypatch.setenv("NEO_EMBEDDING_CONTEXT_TOKENS", "100000")
    assert band_for(load_settings()).tokens == 256


def test_an_over_band_chunk_is_split_into_parts_that_fit_never_fenced(
    kb: KbHandles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = _ctx(tmp_path, monkeypatch)
    whole = embedding_input(
        LONG.rstrip("\n"),
        kind="function",
        name="summarise",
        qualified_name="pkg.long.summarise",
        source_path="pkg/long.py",
        parser_version="2.0.0",
    )
    assert count_tokens(None, [whole])[0] > 3 * 256  # really over the window

    result = _sweep(kb, ctx)
    doc, summary = result["doc"], result["summary"]
    assert doc["outcome"] == "complete"
    assert summary.counts.fenced_poison == 0
    assert summary.counts.fenced_undeliverable == 0
    assert summary.band["bandTokens"] == 256 and summary.band["counted"] == "tokenizer"

    rows = kb.store.get_rows(
        [r["id"] for r in kb.store.tenant_rows("acme")], include_documents=True
    )
    parts = sorted(
        (r for r in rows.values() if PART.match(r["metadata"]["name"])),
        key=lambda r: int(PART.match(r["metadata"]["name"]).group(1)),
    )
    count = len(parts)
    assert count >= 4
    assert [int(PART.match(p["metadata"]["name"]).group(2)) for p in parts] == [count] * count
    # Whole across its parts, in order; each part its own contiguous lines.
    assert "".join(p["document"] for p in parts) == LONG.rstrip("\n")
    lines = [(p["metadata"]["startLine"], p["metadata"]["endLine"]) for p in parts]
    assert lines[0][0] == 1 and lines[-1][1] == LONG.count("\n")
    assert all(b[0] == a[1] + 1 for a, b in zip(lines, lines[1:], strict=False))
    # Every part, as sent (with its header), fits the model's window.
    sent = [
        embedding_input(
            p["document"],
            kind="function",
            name=p["metadata"]["name"],
            qualified_name=p["metadata"]["qualifiedName"],
            source_path="pkg/long.py",
            parser_version="2.0.0",
        )
        for p in parts
    ]
    assert max(count_tokens(None, sent)) <= 256
    # Ids: from the parent's identity, index and count; the short chunk keeps its own.
    parent = chunk_id(
        "acme", "w", "function", "summarise", LONG.rstrip("\n"), "pkg/long.py", "neo-code", "2.0.0"
    )
    assert [p["id"] for p in parts] == [
        part_chunk_id(parent, i, count) for i in range(1, count + 1)
    ]
    assert any(r["metadata"]["name"] == "tiny" for r in rows.values())
    # The declared generation is the parts: the no-hole check holds over them.
    declared = {c.chunk_id for c in kb.ledger.declared_chunks("acme", "w")}
    assert declared == set(rows)

    # Stable: a forced sweep of the same revision declares and finds the same parts.
    again = _sweep(kb, ctx)
    assert again["doc"]["outcome"] == "complete"
    assert {c.chunk_id for c in kb.ledger.declared_chunks("acme", "w")} == declared
    assert again["summary"].counts.requests == 0
