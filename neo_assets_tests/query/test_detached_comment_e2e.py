"""A doc comment a blank line above a function (express's style) is that function's lexical
context even where the parser cut the module row into parts right there and trimmed the
blank line between them (express's ``req.is``). Real git repo, real sweep through
Dagster, real Chroma, the CLI a user runs."""

import json

import pytest

from neo_assets.config.settings import load_settings
from neo_assets.services.handles import open_store
from neo_assets_tests.js_sources import jsdoc_members
from neo_assets_tests.serve.service_harness import ServedKb

MEMBERS = 16
DOC = (
    "Member {i}: settles the codeword{i}x of the request, described at",
    "some length so the module row, which holds every comment, is long.",
)


def _source() -> str:
    """Members each under a JSDoc a blank line above, each doc holding one word no other
    text holds; the module row (every comment) runs over a small chunk bound."""
    return jsdoc_members(MEMBERS, DOC, owner="req", last="module.exports = req\n")


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> ServedKb:
    repos = {("acme", "web"): {"lib/request.js": _source()}}
    return ServedKb.build(
        tmp_path_factory.mktemp("detached"), repos=repos, NEO_MAX_CHUNK_CHARS="400"
    )


def _at_part_edges(kb: ServedKb) -> list[int]:
    """The members whose blank line above is in no row: the parser cut the module there."""
    with kb.environment():
        with open_store(load_settings()) as store:
            ids = [r["id"] for r in store.tenant_rows("acme")]
            rows = store.get_rows(ids, include_documents=False)
    spans = [
        (int(r["metadata"]["startLine"]), int(r["metadata"]["endLine"])) for r in rows.values()
    ]
    assert sum(1 for r in rows.values() if r["metadata"]["kind"] == "module") > 1
    out = []
    for row in rows.values():
        md = row["metadata"]
        if md["kind"] == "function" and not any(a <= md["startLine"] - 1 <= b for a, b in spans):
            out.append(int(str(md["name"]).removeprefix("req.member")))
    return sorted(out)


def test_a_comment_at_a_module_parts_edge_finds_its_function(kb: ServedKb) -> None:
    edges = _at_part_edges(kb)
    assert edges, "no member sits at a module part's edge: change the chunk bound"
    for i in [*edges[:3], next(i for i in range(MEMBERS) if i not in edges)]:
        done = kb.cli(
            "query", "--tenant", "acme", "--kind", "function", "--json", "-k", "1", f"codeword{i}x"
        )
        assert done.returncode == 0, done.stderr
        results = json.loads(done.stdout)["results"]
        assert [r["name"] for r in results] == [f"req.member{i}"], (i, edges)
        assert results[0]["lexical"] > 0, i


def test_a_module_cut_in_parts_answers_with_the_part_that_matched(kb: ServedKb) -> None:
    # The module row (every comment) is one unit of many parts; asked for the last
    # member's word, it answers with the part holding it, not with its first part.
    i = MEMBERS - 1
    done = kb.cli("query", "--tenant", "acme", "--json", "-k", "5", f"codeword{i}x")
    assert done.returncode == 0, done.stderr
    modules = [r for r in json.loads(done.stdout)["results"] if r["kind"] == "module"]
    assert len(modules) == 1, modules
    assert f"codeword{i}x" in modules[0]["document"]
    assert modules[0]["id"] == modules[0]["matchedParts"][0]
    assert "codeword0x" not in modules[0]["document"]
