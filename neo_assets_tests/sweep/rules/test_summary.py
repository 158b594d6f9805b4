"""The summary's counts in one spelling (camelCase), and summaries stored before it."""

import dataclasses
import json

import pytest

from neo_assets.sweep.rules.summary import (
    ALREADY_FENCED,
    ALREADY_PRESENT,
    DEPRECATED_SPELLINGS,
    EMBEDDED,
    FENCED_POISON,
    FENCED_UNDELIVERABLE,
    LANE_COUNTS,
    TIMING_KEYS,
    LaneSummary,
    SweepCounts,
    SweepTimings,
    current_counts,
    metric_name,
    read_stored_summary,
    with_deprecated_spellings,
    with_deprecated_timing_keys,
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


# ------------------------------------------------------------------ the typed summary
def test_counts_read_either_spelling_and_write_camel_case_only() -> None:
    counts = SweepCounts.from_doc(OLD_STYLE["counts"])
    assert counts == SweepCounts(
        offered=7,
        embedded=5,
        already_fenced=1,
        fenced_poison=1,
        fenced_undeliverable=1,
        deferred=0,
        requests=3,
        reused=2,
        already_present=40,
        chunks=48,
    )
    assert counts.to_doc() == current_counts(OLD_STYLE["counts"])
    assert SweepCounts.from_doc(counts.to_doc()) == counts
    # Not counts: a bool, a string, an unknown key.
    assert SweepCounts.from_doc({"embedded": True, "offered": "3", "bogus": 1}) == SweepCounts()


def test_a_lane_on_its_own_has_no_sweep_counts() -> None:
    doc = SweepCounts(embedded=2, offered=2, requests=1).to_doc()
    assert set(doc) == set(LANE_COUNTS)
    assert SweepCounts(chunks=0).to_doc()["chunks"] == 0  # 0 is a count, None is none


def test_timings_are_camel_case_and_the_cli_also_prints_the_old_names() -> None:
    timings = SweepTimings(envelope_s=0.5, write_s=0.25).to_doc()
    assert timings == {"envelopeSeconds": 0.5, "writeSeconds": 0.25}
    for key in TIMING_KEYS.values():
        assert "_" not in key and key.endswith("Seconds")
    both = with_deprecated_timing_keys(timings)
    assert both == {**timings, "envelope_s": 0.5, "write_s": 0.25}
    # Every field of SweepTimings has its key (a new time cannot go out unnamed).
    assert set(TIMING_KEYS) == {f.name for f in dataclasses.fields(SweepTimings)}


def test_a_lane_summary_is_stored_as_the_json_the_readers_know() -> None:
    row = {"code": "PARSE_FAILED", "message": "broke\nat line 3", "details": {}}
    summary = LaneSummary(
        counts=SweepCounts(embedded=3, already_present=4, chunks=7),
        errors=(row,),
        generation="g1",
        timings=SweepTimings(write_s=0.1),
    )
    doc = summary.to_doc()
    assert doc == {
        "counts": {**SweepCounts(embedded=3).to_doc(), "alreadyPresent": 4, "chunks": 7},
        "errors": [row],
        "strikes": [],
        "events": [],
        "generation": "g1",
        "notices": [],
        "timings": {"writeSeconds": 0.1},
    }  # optional parts (band, vectorEvidence, freeze, revision, seconds) absent when None
    stored = read_stored_summary(json.dumps(doc))
    assert stored.count(ALREADY_PRESENT) == 4 and stored.count(EMBEDDED) == 3
    assert stored.first_error_line() == "broke"
    frozen = LaneSummary(freeze={"state": "frozen"}, seconds=1.5).to_doc()
    assert frozen["freeze"] == {"state": "frozen"} and frozen["seconds"] == 1.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.generation = "g2"  # type: ignore[misc]
