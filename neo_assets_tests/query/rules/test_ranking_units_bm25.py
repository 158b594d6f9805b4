"""The ranking steps over plain data: identifier-aware BM25 over chunk text, the parts of
one unit answering as one result (its first part), tests/docs below source."""

from neo_assets.query.rules.fusion import SECONDARY_WEIGHT, fuse_lists
from neo_assets.query.rules.lexical_context import enclosing_blocks
from neo_assets.query.rules.ranking import (
    BM25_FLOOR,
    LexicalIndex,
    above_floor,
    asks_for_secondary,
    is_test_or_doc,
    lexical_tokens,
    names_a_source_file,
    part_of,
    query_terms,
    query_tokens,
)
from neo_assets.sources.rules.definition_line import definition_line


def test_tokens_split_identifiers_and_keep_short_and_qualified_ones() -> None:
    toks = lexical_tokens("if errors.Is(err, ErrNotFound) { parseHTTPHeader(max_split) }")
    for t in ("errors.is", "error", "is", "err", "errnotfound", "not", "found"):
        assert t in toks
    assert {"parsehttpheader", "parse", "http", "header", "max_split", "max", "split"} <= set(toks)
    assert "headers" not in lexical_tokens("headers") and "header" in lexical_tokens("headers")


def test_query_tokens_drop_english_stop_words_but_not_identifiers() -> None:
    assert query_tokens("how is the header parsed") == ["header", "parsed"]
    assert "is" in query_tokens("where is errors.Is used")
    assert query_tokens("a Retry b retry") == ["retry"]


def index_of(rows: dict[str, tuple[str, str, str, str]]) -> LexicalIndex:
    index = LexicalIndex()
    for rid, (name, qualified, doc, path) in rows.items():
        index.add(rid, name, qualified, doc, path=path)
    return index


def test_bm25_finds_a_plain_word_of_the_body_and_prefers_rare_terms() -> None:
    index = index_of(
        {
            "split": (
                "split_once",
                "m.split_once",
                "def split_once(s):\n  return s.split(maxsplit=1)",
                "m.py",
            ),
            "other": ("join", "m.join", "def join(parts):\n  return ','.join(parts)", "m.py"),
            "third": ("walk", "m.walk", "def walk(tree):\n  return tree", "n.py"),
        }
    )
    scores = index.bm25(query_tokens("split on the first separator only with maxsplit"))
    assert max(scores, key=scores.get) == "split"
    assert "third" not in scores
    # The name-only index (the old lexical side) never saw the body's plain word.
    assert index.scores(["maxsplit"]) == {}


def test_a_row_far_below_the_best_bm25_score_is_no_lexical_evidence() -> None:
    # One shared common word must not lift a row the vector list ranks low above the
    # vector list's best: in RRF any rank adds, so the weak tail is left out.
    scores = {"strong": 8.0, "fair": 2.0, "weak": 1.9}
    assert BM25_FLOOR == 0.25
    assert above_floor(scores) == {"strong": 8.0, "fair": 2.0}
    assert above_floor({}) == {}
    vector = ["answer", "weak", "strong"]
    with_tail = fuse_lists([vector, ["strong", "fair", "weak"]], 3)
    without = fuse_lists([vector, sorted(above_floor(scores), key=scores.get, reverse=True)], 3)
    assert [head for head, _s, _m in with_tail] == ["strong", "weak", "answer"]
    assert [head for head, _s, _m in without] == ["strong", "answer", "fair"]


def test_list_weights_and_rrf_k_shape_the_fusion() -> None:
    lists = [["v"], ["b"]]
    # Equal weights tie (broken by id); a heavier second list puts its row first.
    assert [h for h, _s, _m in fuse_lists(lists, 2)] == ["b", "v"]
    assert [h for h, _s, _m in fuse_lists(lists, 2, weights=(2.0, 1.0))] == ["v", "b"]
    assert fuse_lists(lists, 1, rrf_k=0)[0][1] == 1.0
    assert fuse_lists([["v"]], 1, weights=(0.5,))[0][1] == 0.5 / 61


def test_parts_of_a_unit_answer_as_its_first_part() -> None:
    index = index_of(
        {
            "p1": ("Flask.run [part 1/3]", "app.Flask.run", "def run(self, host=None):", "app.py"),
            "p2": ("Flask.run [part 2/3]", "app.Flask.run", "    reloader = ...", "app.py"),
            "p3": ("Flask.run [part 3/3]", "app.Flask.run", "    run_simple(host)", "app.py"),
            "x": ("other", "app.other", "def other(): pass", "app.py"),
        }
    )
    assert part_of("Flask.run [part 2/3]") == ("Flask.run", 2)
    assert part_of("Flask.run") is None
    assert index.unit_heads == {"p1": "p1", "p2": "p1", "p3": "p1"}
    got = fuse_lists([["p3", "x", "p2"]], 10, unit_head=index.unit_heads)
    assert [(rid, matched) for rid, _s, matched in got] == [("p1", ["p3", "p2"]), ("x", ["x"])]
    # Without the unit map the parts stand alone (the legacy ranking).
    assert [rid for rid, _s, _m in fuse_lists([["p3", "x", "p2"]], 10)] == ["p3", "x", "p2"]


def test_a_unit_answers_as_the_part_holding_its_signature() -> None:
    # A long doc comment above a Rust function fills part 1 alone: the unit answers as
    # the part with `pub fn path`, so the result holds the signature.
    doc = "    /// The full path that this entry represents.\n" * 3
    index = index_of(
        {
            "d1": ("DirEntry.path [part 1/2]", "dent.DirEntry.path", doc, "src/dent.rs"),
            "d2": (
                "DirEntry.path [part 2/2]",
                "dent.DirEntry.path",
                "    pub fn path(&self) -> &Path {\n        &self.path\n    }",
                "src/dent.rs",
            ),
            # No part names the unit outside comments: its first part answers.
            "n1": ("macro [part 1/2]", "m.macro", "// a\n", "src/m.rs"),
            "n2": ("macro [part 2/2]", "m.macro", "// b\n", "src/m.rs"),
        }
    )
    assert index.unit_heads == {"d1": "d2", "d2": "d2", "n1": "n1", "n2": "n1"}
    got = fuse_lists([["d1", "n2"]], 10, unit_head=index.unit_heads)
    assert [(rid, matched) for rid, _s, matched in got] == [("d2", ["d1"]), ("n1", ["n2"])]
    assert definition_line("DirEntry.path", doc + "    pub fn path(&self)") == "pub fn path(&self)"
    assert definition_line("Flask.run", "@setupmethod\ndef run(self):") == "def run(self):"
    assert definition_line("run", "# run it\n") is None


def test_tests_and_docs_rank_below_source_unless_asked_for() -> None:
    assert is_test_or_doc("tests/test_app.py") and is_test_or_doc("command_test.go")
    assert is_test_or_doc("README.md", "markdown") and is_test_or_doc("docs/api.rst")
    assert is_test_or_doc("examples/tutorial/app.py")
    assert not is_test_or_doc("src/flask/app.py")
    # cobra's doc/ package is Go source that generates the docs: not demoted.
    assert not is_test_or_doc("doc/md_docs.go", "go")
    assert asks_for_secondary("which test covers the retry") and not asks_for_secondary(
        "how are retries delayed"
    )
    lists = [["t", "s"], ["t", "s"]]
    assert [r for r, _s, _m in fuse_lists(lists, 2)] == ["t", "s"]
    got = fuse_lists(lists, 2, demoted={"t"})
    assert [r for r, _s, _m in got] == ["s", "t"]
    assert got[1][1] == (2 / 61) * SECONDARY_WEIGHT


def test_equal_scores_are_ordered_by_where_the_rows_stand_not_by_their_ids() -> None:
    # Chunk ids change with the parser version and its rules digest while the chunks stay
    # the same: the ranking, and so the self-evaluation a switch is gated on, must not.
    def ranked(ids: dict[str, str]) -> tuple[list[str], list[str]]:
        index = LexicalIndex()
        for key, line in (("early", 10), ("late", 90)):
            index.add(ids[key], "handler", "app.handler", "def handler(): pass", "app.py", "", line)
        scores = index.scores(query_terms("handler"))
        assert len(set(scores.values())) == 1  # a tie
        by_score = sorted(scores, key=lambda rid: (-scores[rid], index.place(rid)))
        fused = fuse_lists([["v"], by_score], 3, place=index.place)
        names = {rid: key for key, rid in ids.items()}
        return [names[r] for r in by_score], [names.get(h, h) for h, _s, _m in fused]

    assert ranked({"early": "a1", "late": "z9"}) == ranked({"early": "z9", "late": "a1"})
    assert ranked({"early": "z9", "late": "a1"})[0] == ["early", "late"]
    # Without a place the id decides (what the ranking did before).
    assert [h for h, _s, _m in fuse_lists([["z9"], ["a1"]], 2)] == ["a1", "z9"]


def test_a_repo_scoped_query_ranks_by_its_own_repos_statistics() -> None:
    # A repo's lexical ranking must not move when its tenant adds a repo: BM25's document
    # frequencies, mean length and the "too common" cut are the scope's rows alone.
    def rows_of(repo: str, n: int, text: str) -> list[tuple[str, str, str]]:
        return [(f"{repo}{i}", f"f{i}", text) for i in range(n)]

    alone = LexicalIndex()
    together = LexicalIndex()
    a_rows = [
        ("a0", "split_once", "def split_once(s):\n  return s.split(maxsplit=1)"),
        ("a1", "parse", "def parse(s):\n  return s.split()\n  # header parser"),
        ("a2", "walk", "def walk(tree):\n  return tree"),
    ]
    # Another repo where "split" is in every row and the texts are long.
    b_rows = rows_of("b", 300, "def g():\n  " + "split header " * 20)
    for rid, name, doc in a_rows:
        alone.add(rid, name, f"m.{name}", doc, path="m.py", repo="a")
        together.add(rid, name, f"m.{name}", doc, path="m.py", repo="a")
    for rid, name, doc in b_rows:
        together.add(rid, name, f"n.{name}", doc, path="n.py", repo="b")
    tokens = query_tokens("maxsplit of the header")
    mine = alone.bm25(tokens, ["a"])
    assert set(mine) == {"a0", "a1"}
    assert mine == {
        rid: s for rid, s in together.bm25(tokens, ["a"]).items() if rid.startswith("a")
    }
    # Over the whole tenant "header" is in more than half the rows: it ranks nothing there,
    # and a1 (the row of a that says it) would have no lexical evidence.
    assert "a1" not in together.bm25(tokens)
    # The exact-name list's "common" cut is the scope's too: `header` is in 300 of b's
    # rows but one of a's.
    assert together.common("header") and not together.common("header", ["a"])
    in_a = together.scores(["header_x.header"], ["a"])
    assert {rid: s for rid, s in in_a.items() if rid.startswith("a")} == {"a1": 2.0}
    assert "a1" not in together.scores(["header_x.header"])


def test_a_method_is_found_by_the_names_of_the_block_that_holds_it() -> None:
    # A Rust method's text names neither its trait nor its type (`fn to_value(&self)`);
    # the impl block holding it does, so BM25 reads the block's name with the method.
    rows = [
        ("impl", "src/value.rs", "class", "std.impl ToValue for Rc", 444, 451),
        ("m", "src/value.rs", "method", "std.Rc.to_value", 448, 450),
        ("outer", "src/value.rs", "class", "std", 400, 500),
        ("free", "src/value.rs", "function", "helper", 600, 610),
        ("other", "src/key.rs", "method", "Key.as_str", 448, 450),
    ]
    blocks = enclosing_blocks(rows)
    assert blocks == {"m": ("impl", "std.impl ToValue for Rc")}  # the innermost block only
    with_context = LexicalIndex()
    without = LexicalIndex()
    body = "fn to_value(&self) -> Value<'_> {\n    (**self).to_value()\n}"
    for index, ctx in ((with_context, blocks["m"][1]), (without, "")):
        index.add("m", "Rc.to_value", "std.Rc.to_value", body, path="src/value.rs", context=ctx)
        index.add("k", "Key.as_str", "Key.as_str", "fn as_str(&self) -> &str", path="src/key.rs")
    tokens = query_tokens("Implement ToValue for Rc")
    assert with_context.bm25(tokens)["m"] > without.bm25(tokens).get("m", 0.0)
    # And the exact-name list reads the spelled trait in it as in the method's text.
    assert with_context.scores(["ToValue"]) == {"m": 2.0}
    assert without.scores(["ToValue"]) == {}


def test_a_rust_path_is_a_qualified_name_like_a_dotted_one() -> None:
    # `Error::new` names the method as `errors.Is` does in Go: looked up whole, not as
    # the plain word "Error" with "new" dropped for its length.
    assert query_terms("Use doc_cfg to mark Error::new") == ["doc_cfg", "Error.new", "mark"]
    assert {"error.new", "error", "new"} <= set(query_tokens("mark Error::new"))
    assert lexical_tokens("Error::construct(e)")[:3] == ["error.construct", "error", "construct"]
    index = index_of(
        {
            "new": ("Error.new", "error.Error.new", "pub fn new<E>(error: E) -> Self", "e.rs"),
            "msg": ("Error.msg", "error.Error.msg", "pub fn msg<M>(message: M) -> Self", "e.rs"),
        }
    )
    assert max(index.scores(query_terms("mark Error::new")).items(), key=lambda x: x[1])[0] == "new"


def test_a_file_name_in_the_question_asks_for_its_stem_not_its_suffix() -> None:
    # "chain.rs" looked up the leaf "rs": every Rust module's qualified name holds it.
    assert names_a_source_file("chain.rs") and names_a_source_file("utils.py")
    # A Go method and a data file's suffix are not code file names.
    assert not names_a_source_file("errgroup.Go") and not names_a_source_file("response.json")
    assert not names_a_source_file("errors.Is")
    index = index_of(
        {
            "chain": ("src/chain.rs", "src/chain.rs", "pub struct Chain", "src/chain.rs"),
            "error": ("src/error.rs", "src/error.rs", "pub struct Error", "src/error.rs"),
        }
    )
    assert index.scores(["chain.rs"]) == {"chain": 4.0}


def test_a_rust_impl_block_of_one_function_answers_as_that_function() -> None:
    # `impl ToValue for Rc {}` is the block's header alone; its one function is what a
    # question about the impl asks for. A block of two functions, or a Python class,
    # stays a result of its own.
    index = LexicalIndex()
    rows = [
        ("impl", "impl ToValue for Rc", "impl<T> ToValue for Rc<T> {\n}", ""),
        ("m", "Rc.to_value", "fn to_value(&self) -> Value<'_> {", "impl"),
        ("impl2", "impl Chain", "impl Chain {\n}", ""),
        ("a", "Chain.new", "pub fn new() -> Self {", "impl2"),
        ("b", "Chain.len [part 1/2]", "pub fn len(&self) -> usize {", "impl2"),
        ("b2", "Chain.len [part 2/2]", "    self.count()\n}", "impl2"),
        ("cls", "Config", "class Config:\n    pass", ""),
        ("c", "Config.load", "def load(self):", "cls"),
    ]
    for rid, name, doc, block in rows:
        index.add(rid, name, name, doc, path="src/lib.rs", block=block)
    heads = index.unit_heads
    assert heads["impl"] == "m"
    assert "impl2" not in heads and "cls" not in heads
    got = fuse_lists([["impl", "cls", "m"]], 10, unit_head=heads)
    assert [(rid, matched) for rid, _s, matched in got] == [("m", ["impl", "m"]), ("cls", ["cls"])]
