"""Answers from one listing of a repo's rows: absent when not listed, present when listed
and recorded, asked again when listed but not recorded."""

from hypothesis import given
from hypothesis import strategies as st

from neo_assets.core.sweep.presence import answer_from_listing

IDS = st.sets(st.sampled_from("abcdefgh"))


def test_each_kind_of_id_gets_its_answer() -> None:
    present, again = answer_from_listing(
        ["kept", "stale", "new", "kept", "stale"], listed={"kept", "stale"}, recorded={"kept"}
    )
    assert present == {"kept"}
    assert again == ["stale"]  # once, in order; "new" is absent without a question


@given(wanted=st.lists(st.sampled_from("abcdefgh")), listed=IDS, recorded=IDS)
def test_answers_split_the_listed_ids_and_never_take_an_unlisted_one(
    wanted: list[str], listed: set[str], recorded: set[str]
) -> None:
    present, again = answer_from_listing(wanted, listed, recorded)
    assert present | set(again) == set(wanted) & listed
    assert not present & set(again) and len(again) == len(set(again))
    assert present <= recorded and not set(again) & recorded
