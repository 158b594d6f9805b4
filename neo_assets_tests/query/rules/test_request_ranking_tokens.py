"""query/rules/request.py, query/rules/ranking.py and serve/rules/tokens.py over plain data."""

import hashlib

import pytest

from neo_assets.core import codes
from neo_assets.query.rules.ranking import (
    LexicalIndex,
    fuse,
    lexical_score,
    looks_like_identifier,
    query_terms,
)
from neo_assets.query.rules.request import (
    MAX_K,
    QueryInputError,
    glob_matches_everything,
    parse_chunk_id,
    parse_search,
)
from neo_assets.serve.rules.tokens import TokenRecord, format_token, token_hash, verify


def test_parse_search_accepts_a_full_request():
    got = parse_search(
        {"query": "q", "k": 3, "repo": "w", "path": "src/*.py", "language": "go", "kind": "method"}
    )
    assert (got.k, got.repo, got.filters, got.expand) == (
        3,
        "w",
        {"path": "src/*.py", "language": "go", "kind": "method"},
        False,
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "x" * 4001}, "query"),
        ({"query": "x", "k": 0}, "k"),
        ({"query": "x", "k": MAX_K + 1}, "k"),
        ({"query": "x", "k": 2.0}, "k"),
        ({"query": "x", "tenantId": "b"}, "tenantId"),
        ({"query": "x", "path": "**/*"}, "path"),
        ({"query": "x", "repo": ["a"]}, "repo"),
        ({"query": "x", "expand": 1}, "expand"),
    ],
)
def test_parse_search_names_the_field_at_fault(body, field):
    with pytest.raises(QueryInputError) as err:
        parse_search(body)
    assert err.value.field == field and err.value.status == 400
    assert err.value.as_json()["error"]["field"] == field


def test_globs_and_chunk_ids():
    assert glob_matches_everything("*") and glob_matches_everything("**/*")
    assert not glob_matches_everything("src/**")
    assert parse_chunk_id("a" * 64) == "a" * 64
    with pytest.raises(QueryInputError):
        parse_chunk_id("../" + "a" * 61)


def test_query_terms_put_identifiers_first():
    assert query_terms("how does dispatch_request use ExactArgs and routing") == [
        "dispatch_request",
        "ExactArgs",
        "routing",
    ]
    assert query_terms("what is the") == []


def test_lexical_score_and_index_agree():
    md = {"name": "dispatch_request", "qualifiedName": "app.Router.dispatch_request"}
    doc = "def dispatch_request(self):\n    return self.routes"
    index = LexicalIndex()
    index.add("r", md["name"], md["qualifiedName"], doc)
    for terms in (["dispatch_request"], ["Router"], ["routes"], ["self.routes"], ["missing"]):
        assert index.scores(terms).get("r", 0.0) == lexical_score(doc, md, terms)
    assert lexical_score(doc, md, ["dispatch_request"]) > lexical_score(doc, md, ["app.Router"])
    assert lexical_score(doc, md, ["app.Router"]) > lexical_score(doc, md, ["self.routes"]) > 0
    # A plain word counts only as a chunk's exact name, never as a word of its text.
    assert lexical_score(doc, md, ["routes"]) == 0
    assert lexical_score(doc, {"name": "routes"}, ["routes"]) == 3


def test_an_acronym_in_prose_counts_as_a_plain_word():
    # "JSON" in "Send an object as a JSON response" is prose, not a symbol spelled on
    # purpose: it matches a chunk named JSON (gin's c.JSON), not every text saying JSON.
    assert not looks_like_identifier("JSON") and not looks_like_identifier("HTTP")
    assert looks_like_identifier("HTTPError") and looks_like_identifier("MAX_SIZE")
    assert looks_like_identifier("jsonParse") and looks_like_identifier("v2")
    said = "res.send = function send(body) {\n  // JSON when an object\n}"
    assert lexical_score(said, {"name": "send"}, ["JSON"]) == 0
    assert lexical_score("func (c *Context) JSON(code int)", {"name": "JSON"}, ["JSON"]) == 3
    assert query_terms("Send an object as a JSON response") == [
        "Send",
        "object",
        "JSON",
        "response",
    ]


def test_fuse_lifts_a_row_found_by_both_lists():
    ranked = fuse(["v1", "both", "v3"], {"both": 6.0, "lex": 3.0}, 3)
    assert [rid for rid, _ in ranked][0] == "both"
    assert {rid for rid, _ in fuse(["v1"], {}, 5)} == {"v1"}


def record(token: str, revoked: float | None = None) -> TokenRecord:
    return TokenRecord(token[4:20], token_hash(token), "acme", (), "", 1.0, revoked)


def test_verify_tokens():
    token = format_token("0123456789abcdef", "s" * 43)
    good = {"0123456789abcdef": record(token)}
    assert verify(token, good).record is not None
    assert verify(None, good).code == codes.AUTH_MISSING_TOKEN
    assert verify(token[:-1] + "t", good).code == codes.AUTH_UNKNOWN_TOKEN
    assert verify("garbage", good).code == codes.AUTH_UNKNOWN_TOKEN
    revoked = {"0123456789abcdef": record(token, revoked=2.0)}
    assert verify(token, revoked).code == codes.AUTH_REVOKED_TOKEN
    assert token_hash(token) == hashlib.sha256(token.encode()).hexdigest()
    assert "token_hash" not in record(token).public()


def test_a_text_token_in_most_rows_does_not_count():
    index = LexicalIndex()
    for i in range(300):
        index.add(f"r{i}", f"f{i}", "", "return the_widget")
    index.add("special", "render_widget", "", "return the_widget")
    assert "r1" not in index.scores(["the_widget"])  # in every row: tells nothing
    assert index.scores(["render_widget"]) == {"special": 6.0}
