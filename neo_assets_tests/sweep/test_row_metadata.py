"""What parser 2.x knows about a chunk reaches its Chroma row: ``language``,
``startLine``/``endLine`` (1-based, inclusive), ``qualifiedName`` and ``parent`` ("" when
none), on fresh rows and on rows re-embedded from the recorded generation."""

import time
from pathlib import Path

import pytest

from neo_assets.config.settings import load_settings
from neo_assets.core.ids.stamps import CHUNK_META_KEYS, tenant_filter
from neo_assets.embedding.providers.hashing import HashingProvider
from neo_assets.store.chroma_store import STAMP_KEYS
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

GO = """package widgets

// Command is a command.
type Command struct {
\tName string
}

// Execute runs the command.
func (c *Command) Execute() error {
\treturn nil
}

func Helper() int {
\treturn 1
}
"""

JS = """export default class Collection {
    doSort(a, b) {
        return a - b;
    }
}
"""


def _repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "r")
    repo.write("cmd/command.go", GO)
    repo.write("src/Collection.mjs", JS)
    repo.write("notes.txt", "just some text\n")
    repo.commit("one", when=1_700_000_000)
    return repo


def _ctx(tmp_path: Path, repo: GitRepo, version: str, monkeypatch) -> RepoContext:
    tenants = write_tenants(
        tmp_path / f"t-{version}.yaml", {"acme": [repo_entry("w", repo.path, version=version)]}
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    t = load_tenants(tenants).tenants[0]
    return RepoContext(tenant=t, repo=t.repos[0])


def _sweep(kb: KbHandles, ctx: RepoContext) -> dict:
    settings = load_settings()
    now = time.time()
    env = envelope_step(ctx, settings, kb.ledger, now)
    chunks = chunk_step(ctx, settings, kb.ledger, env, now)
    summary = embed_step(
        ctx, settings, kb.store, kb.ledger, env, chunks, EmbedContext(provider=HashingProvider())
    )
    return census_step(ctx, settings, kb.ledger, env, summary, now).to_doc()


def _rows(kb: KbHandles) -> dict[str, dict]:
    ids = [r["id"] for r in kb.store.tenant_rows("acme")]
    rows = kb.store.get_rows(ids, include_documents=True).values()
    return {r["metadata"]["name"]: r for r in rows}


def test_parser_2_rows_carry_language_lines_qualified_name_and_parent(
    kb: KbHandles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = _ctx(tmp_path, _repo(tmp_path), "2.0.0", monkeypatch)
    assert _sweep(kb, ctx)["outcome"] == "complete"
    rows = _rows(kb)
    for row in rows.values():
        md = row["metadata"]
        assert set(STAMP_KEYS) | set(CHUNK_META_KEYS) <= set(md)
        assert all(md[k] is not None for k in CHUNK_META_KEYS)
        assert isinstance(md["startLine"], int) and isinstance(md["endLine"], int)
        assert 1 <= md["startLine"] <= md["endLine"]
    execute = rows["Command.Execute"]["metadata"]
    assert execute["language"] == "go"
    assert execute["qualifiedName"] == "widgets.Command.Execute"
    assert execute["parent"] == "Command"
    # The doc comment belongs to the method: lines 8-11 of the file.
    assert (execute["startLine"], execute["endLine"]) == (8, 11)
    helper = rows["Helper"]["metadata"]
    assert helper["parent"] == "" and helper["qualifiedName"] == "widgets.Helper"
    sort = rows["Collection.doSort"]["metadata"]
    assert sort["language"] == "javascript" and sort["parent"] == "Collection"
    assert (sort["startLine"], sort["endLine"]) == (2, 4)


def test_parser_1_rows_have_the_keys_with_lines_and_empty_metadata(
    kb: KbHandles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = _ctx(tmp_path, _repo(tmp_path), "1.0.0", monkeypatch)
    assert _sweep(kb, ctx)["outcome"] == "complete"
    rows = _rows(kb)
    assert rows
    for row in rows.values():
        md = row["metadata"]
        assert (md["language"], md["qualifiedName"], md["parent"]) == ("", "", "")
        assert md["startLine"] == 1 and md["endLine"] >= 1


def test_a_reused_row_re_embedded_gets_its_metadata_from_the_reparse(
    kb: KbHandles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = _ctx(tmp_path, _repo(tmp_path), "2.0.0", monkeypatch)
    _sweep(kb, ctx)
    before = _rows(kb)["Command.Execute"]
    # The row goes missing (an incomplete earlier sweep, a lost write): the next sweep
    # reuses the recorded chunk (no text) and must re-parse it to embed it again.
    kb.store.delete_ids([before["id"]])
    assert before["id"] not in {r["id"] for r in kb.store.tenant_rows("acme")}
    assert _sweep(kb, ctx)["outcome"] == "complete"
    after = _rows(kb)["Command.Execute"]
    assert after["id"] == before["id"]
    assert after["document"] == before["document"]
    for key in CHUNK_META_KEYS:
        assert after["metadata"][key] == before["metadata"][key], key
    assert kb.store.count_where(tenant_filter("acme", "w")) == len(_rows(kb))
