"""The parts of one unit answer as one result, over plain data: a unit the parser cut in
two and the sweep cut again (``f [part 2/2] [part 1/3]``) is one unit whose parts keep
their order, and a unit with no signature (a module) answers as its part that matched."""

from neo_assets.query.rules.fusion import fuse_lists
from neo_assets.query.rules.ranking import LexicalIndex, unit_part

SIGNATURE = "def handle(request):\n    step()"
BODY = "    more()\n    more()"


def test_unit_part_takes_every_part_suffix_off() -> None:
    assert unit_part("handle") is None
    assert unit_part("handle [part 3/4]") == ("handle", (3,))
    assert unit_part("lib/a.js [part 2/2] [part 1/7]") == ("lib/a.js", (2, 1))


def _cut_twice(index: LexicalIndex, order: list[str]) -> None:
    """``handle``, cut by the parser in two and each half by the sweep; rows added in
    ``order`` (the store returns them in any)."""
    rows = {
        "a1": ("handle [part 1/2] [part 1/2]", SIGNATURE),
        "a2": ("handle [part 1/2] [part 2/2]", BODY),
        "b1": ("handle [part 2/2] [part 1/2]", BODY),
        "b2": ("handle [part 2/2] [part 2/2]", BODY),
    }
    for rid in order:
        name, text = rows[rid]
        index.add(rid, name, "app.handle", text, path="app.py", kind="function")


def test_a_unit_cut_twice_answers_as_its_signature_part_in_any_order() -> None:
    for order in (["a1", "a2", "b1", "b2"], ["b2", "b1", "a2", "a1"], ["a1", "b1", "a2", "b2"]):
        index = LexicalIndex()
        _cut_twice(index, order)
        assert index.unit_heads == dict.fromkeys(["a1", "a2", "b1", "b2"], "a1"), order
        got = fuse_lists([["b2", "a2"]], 5, unit_head=index.unit_heads)
        assert [(h, m) for h, _s, m in got] == [("a1", ["b2", "a2"])]


def test_a_unit_whose_first_part_is_not_served_answers_part_by_part() -> None:
    index = LexicalIndex()
    index.add("b1", "handle [part 2/2] [part 1/2]", "app.handle", BODY, path="app.py")
    index.add("b2", "handle [part 2/2] [part 2/2]", "app.handle", BODY, path="app.py")
    assert index.unit_heads == {}


def _module(index: LexicalIndex) -> None:
    for rid, name in (
        ("m1", "lib/a.js [part 1/2] [part 1/2]"),
        ("m2", "lib/a.js [part 1/2] [part 2/2]"),
        ("m3", "lib/a.js [part 2/2] [part 1/3]"),
        ("m4", "lib/a.js [part 2/2] [part 2/3]"),
    ):
        index.add(rid, name, "lib/a.js", f"// text of {rid}", path="lib/a.js", kind="module")
    index.add("f", "handle", "handle", SIGNATURE, path="lib/a.js", kind="function")


def test_a_module_answers_as_its_part_that_matched_best() -> None:
    index = LexicalIndex()
    _module(index)
    assert index.unit_heads["m4"] == "m1"
    assert index.answers_as_best_part == {"m1"}
    got = fuse_lists(
        [["m4", "f", "m2"]],
        5,
        unit_head=index.unit_heads,
        best_part=index.answers_as_best_part,
    )
    assert [(h, m) for h, _s, m in got] == [("m4", ["m4", "m2"]), ("f", ["f"])]
    # Without the step (the legacy ranking), the unit's first part.
    got = fuse_lists([["m4", "f"]], 5, unit_head=index.unit_heads)
    assert [h for h, _s, _m in got] == ["m1", "f"]


def test_a_kept_best_row_of_a_module_keeps_its_place_and_answers_as_that_part() -> None:
    index = LexicalIndex()
    _module(index)
    lists = [["m3", "x", "y"], ["x", "y", "z", "w", "v"], ["y", "x", "z", "w", "v"]]
    got = fuse_lists(
        lists,
        10,
        unit_head=index.unit_heads,
        best_part=index.answers_as_best_part,
        keep_first=(0,),
        keep_within=3,
    )
    assert [h for h, _s, _m in got][:3] == ["x", "y", "m3"]
