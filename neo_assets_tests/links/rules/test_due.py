"""When a repo's links are due: over plain facts, no ledger."""

import math

import pytest

from neo_assets.links.rules.due import (
    LINKS_GENERATION_MOVED,
    LINKS_NEVER,
    LINKS_PARAMS_CHANGED,
    LINKS_ROWS_ADDED,
    links_due_reason,
    links_run_key,
)

PARAMS = {"windowSeconds": 86400.0, "perChunk": 20, "threshold": 0.7, "topK": 20}
LINKED = {"generation_recorded_at": 100.0, "computed_at": 110.0, "params": dict(PARAMS)}


def due(**kw):
    facts = {
        "generation_recorded_at": 100.0,
        "link_set": LINKED,
        "params": PARAMS,
        "last_sweep_at": 105.0,
        "last_sweep_embedded": 0,
    }
    return links_due_reason(**{**facts, **kw})


def test_links_of_the_current_generation_and_params_are_not_due() -> None:
    assert due() is None


def test_no_generation_nothing_to_link() -> None:
    assert due(generation_recorded_at=None, link_set=None) is None


def test_never_linked() -> None:
    assert due(link_set=None) == LINKS_NEVER


def test_a_new_generation_makes_them_due() -> None:
    assert due(generation_recorded_at=120.0) == LINKS_GENERATION_MOVED


def test_changed_parameters_make_them_due() -> None:
    assert due(params={**PARAMS, "topK": 5}) == LINKS_PARAMS_CHANGED


def test_rows_written_after_the_links_make_them_due() -> None:
    assert due(last_sweep_at=120.0, last_sweep_embedded=3) == LINKS_ROWS_ADDED
    # ... but not rows written before the links were computed, nor a sweep that wrote none
    assert due(last_sweep_at=105.0, last_sweep_embedded=3) is None
    assert due(last_sweep_at=120.0, last_sweep_embedded=0) is None


@pytest.mark.parametrize(
    "torn",
    [
        {"generation_recorded_at": None},
        {"generation_recorded_at": "100"},
        {"generation_recorded_at": math.nan},
        {"generation_recorded_at": True},
        {"params": None},
    ],
)
def test_a_torn_link_set_reads_as_due(torn) -> None:
    assert due(link_set={**LINKED, **torn}) is not None


def test_a_torn_computed_at_with_new_rows_reads_as_due() -> None:
    assert due(link_set={**LINKED, "computed_at": None}, last_sweep_embedded=1) == LINKS_ROWS_ADDED


def test_run_key_moves_with_every_fact() -> None:
    base = {"generation_recorded_at": 100.0, "link_set": LINKED, "last_sweep_at": 105.0}
    key = links_run_key("acme/w", **base)
    assert links_run_key("acme/w", **base) == key
    assert links_run_key("acme/x", **base) != key
    assert links_run_key("acme/w", **{**base, "generation_recorded_at": 101.0}) != key
    assert links_run_key("acme/w", **{**base, "last_sweep_at": 106.0}) != key
    moved = {**LINKED, "computed_at": 111.0}
    assert links_run_key("acme/w", **{**base, "link_set": moved}) != key
