"""The summary's counts in one spelling (camelCase), and summaries stored before it."""

import json

from neo_assets.core.sweep.summary import (
    ALREADY_FENCED,
    ALREADY_PRESENT,
    DEPRECATED_SPELLINGS,
    EMBEDDED,
    FENCED_POISON,
    FENCED_UNDELIVERABLE,
    LANE_COUNTS,
    current_counts,
    metric_name,
    read_stored_summary,
    with_deprecated_spellings,
    zero_lane_counts,
)

# A last_summary as a knowledge base swept before this release holds it.
OLD_STYLE = {
    "counts": {
        "offered": 7,
        "embedded": 5,
        "already_fenced": 1,
        "fenced_poison": 1,
        "fenced_undeliverable": 1,
        "deferred": 0,
        "requests": 3,
        "already_present": 40,
        "reused": 2,
        "chunks": 48,
    },
    "errors": [{"code": "PARSE_FAILED", "message": "acme/w: parser broke\n  at line 3"}],
    "generation": "g1",
}


def test_every_count_is_camel_case() -> None:
    for key in (*LANE_COUNTS, ALREADY_PRESENT):
        assert "_" not in key and key[0].islower()
    assert zero_lane_counts() == dict.fromkeys(LANE_COUNTS, 0)
    assert set(DEPRECATED_SPELLINGS) == {
        ALREADY_PRESENT,
        ALREADY_FENCED,
        FENCED_POISON,
        FENCED_UNDELIVERABLE,
    }


def test_an_old_style_stored_summary_reads_as_the_new_spelling() -> None:
    stored = read_stored_summary(json.dumps(OLD_STYLE))
    assert stored.count(ALREADY_PRESENT) == 40
    assert stored.count(ALREADY_FENCED) == 1
    assert stored.count(FENCED_POISON) == stored.count(FENCED_UNDELIVERABLE) == 1
    assert stored.count(EMBEDDED) == 5 and stored.count("chunks") == 48
    assert "already_present" not in stored.counts  # one spelling once read
    assert stored.first_error_line() == "acme/w: parser broke"


def test_a_new_style_summary_reads_the_same_and_the_new_spelling_wins() -> None:
    new = {"counts": with_deprecated_spellings(OLD_STYLE["counts"]), "errors": []}
    stored = read_stored_summary(json.dumps(new))
    assert dict(stored.counts) == current_counts(OLD_STYLE["counts"])
    assert stored.first_error_line() is None
    both = current_counts({"alreadyPresent": 3, "already_present": 9})
    assert both == {"alreadyPresent": 3}


def test_a_torn_or_missing_summary_reads_as_empty() -> None:
    for raw in (None, "", "{not json", "[1, 2]", json.dumps({"counts": [1], "errors": "x"})):
        stored = read_stored_summary(raw)
        assert stored.count(EMBEDDED) == 0 and stored.first_error_line() is None
    assert read_stored_summary(json.dumps({"counts": {"embedded": True}})).count(EMBEDDED) == 0
    assert read_stored_summary(json.dumps({"errors": ["no mapping"]})).first_error_line() is None


def test_the_cli_shape_has_both_spellings_equal_and_keeps_order() -> None:
    counts = current_counts(OLD_STYLE["counts"])
    out = with_deprecated_spellings(counts)
    for new, old in DEPRECATED_SPELLINGS.items():
        assert out[new] == out[old] == counts[new]
    assert list(out)[: len(counts)] == list(counts)  # the new spelling first, as produced
    assert with_deprecated_spellings({"embedded": 1}) == {"embedded": 1}


def test_plots_keep_their_names() -> None:
    assert metric_name(FENCED_POISON) == "fenced_poison"
    assert metric_name(ALREADY_PRESENT) == "already_present"
    assert metric_name(EMBEDDED) == "embedded"
