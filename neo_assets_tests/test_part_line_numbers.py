"""A part the sweep cuts from a chunk over the band names the file lines its text is on.
A module row's text is the file less its units, so its parts' lines cannot be counted
from the module's first line: koa's `lib/response.js [part 1/2] [part 2/8]` said 38–117
and held text from line 41 on. Real git repo, real sweep through Dagster, real Chroma."""

from pathlib import Path

import pytest

from neo_assets.config.settings import load_settings
from neo_assets.services.handles import open_store
from neo_assets_tests.js_sources import jsdoc_members
from neo_assets_tests.serve.service_harness import ServedKb

DOC = (
    "Member number {i} of the response, described at some length so the",
    "module row, which holds every comment, runs over the band.",
)


def _source() -> str:
    """A module of JSDoc'd members, each doc a blank line above its function (koa's
    style), long enough that the module row is cut into parts at a small band."""
    return jsdoc_members(24, DOC, owner="exports", last="module.exports.done = true\n")


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> ServedKb:
    repos = {("acme", "shop"): {"lib/response.js": _source()}}
    return ServedKb.build(
        tmp_path_factory.mktemp("part-lines"), repos=repos, NEO_EMBEDDING_CONTEXT_TOKENS="96"
    )


def test_every_rows_lines_hold_its_text_module_parts_included(kb: ServedKb, tmp_path: Path) -> None:
    lines = _source().split("\n")
    with kb.environment():
        with open_store(load_settings()) as store:
            ids = [r["id"] for r in store.tenant_rows("acme")]
            rows = store.get_rows(ids, include_documents=True)
    module_parts = [r for r in rows.values() if r["metadata"]["kind"] == "module"]
    assert len(module_parts) > 1, "the module row was not cut into parts: lower the band"
    for row in rows.values():
        md, text = row["metadata"], row["document"].removesuffix("\n").split("\n")
        first, last = int(md["startLine"]), int(md["endLine"])
        assert lines[first - 1] == text[0], (md["name"], first)
        assert lines[last - 1] == text[-1], (md["name"], last)
