"""Which missing chunks copy a stored vector and which are sent, once per input."""

from neo_assets.embedding.rules.lane import LaneItem
from neo_assets.embedding.rules.reuse import embedding_input_digest, plan_reuse


def test_stored_inputs_are_copied_and_each_other_input_is_sent_once() -> None:
    items = [LaneItem(c, t) for c, t in (("1", "a"), ("2", "b"), ("3", "b"), ("4", "c"))]
    digest_of = {i.chunk_id: embedding_input_digest(i.text) for i in items}
    plan = plan_reuse(items, digest_of, {embedding_input_digest("a"): [0.0]})
    assert plan.copy == {"1": embedding_input_digest("a")}
    assert [i.chunk_id for i in plan.send] == ["2", "4"]
    assert plan.followers == {"2": ["3"]}


def test_the_digest_is_of_the_exact_input() -> None:
    assert embedding_input_digest("x") != embedding_input_digest("x ")
    assert len(embedding_input_digest("x")) == 64
