"""Alerts as plain data: scope, offenders, links, Slack payload, order, cursor, backoff."""

import json

import pytest

from neo_assets.alerts.rules import (
    ALERT_KIND_CHECK,
    ALERT_KIND_RUN,
    DEFAULT_UI_BASE_URL,
    OFFENDING_CAP,
    STREAM_CHECKS,
    STREAM_RUNS,
    AlertCursor,
    CheckEvaluation,
    Pending,
    RunFailure,
    advance_cursor,
    alert_from_check,
    alert_from_run_failure,
    alert_scope,
    encode_cursor,
    initial_cursor,
    merge_pending,
    offending_items,
    parse_cursor,
    retry_delays,
    retry_wait,
    run_url,
    slack_payload,
)


def _check(**kw) -> CheckEvaluation:
    base = dict(
        event_id=7,
        run_id="0123456789abcdef",
        occurred_at=1_700_000_000.0,
        asset_key="kb_reconciliation",
        check_name="no_hole",
        passed=False,
        severity="ERROR",
        partition_key="acme/widgets",
        description="2 yielded paths lack a complete set",
        metadata={"offending_paths": ["widgets:a.py", "widgets:b.py"]},
    )
    base.update(kw)
    return CheckEvaluation(**base)


# ------------------------------------------------------------------------ scope
@pytest.mark.parametrize(
    ("key", "metadata", "expected"),
    [
        ("acme/widgets", {}, ("acme", "widgets")),
        ("acme", {}, ("acme", None)),
        ("acme", {"repoSlug": "widgets"}, ("acme", "widgets")),
        (None, {"tenantId": "globex", "repoSlug": "tools"}, ("globex", "tools")),
        (None, {"tenant_id": "globex", "repo": "tools"}, ("globex", "tools")),
        # the partition scoped the run: it wins over what the metadata says
        ("acme/widgets", {"tenantId": "globex", "repoSlug": "tools"}, ("acme", "widgets")),
        ("Not A Key/x", {}, (None, None)),
        (None, {"tenantId": ""}, (None, None)),
        (None, None, (None, None)),
    ],
)
def test_alert_scope(key, metadata, expected) -> None:
    assert alert_scope(key, metadata) == expected


def test_alert_scope_ignores_a_tenant_partition_that_is_not_an_id() -> None:
    assert alert_scope("UPPER", {"tenantId": "acme"}) == ("acme", None)


# ------------------------------------------------------------------------ offenders
def test_offenders_are_capped_and_the_rest_counted() -> None:
    paths = [f"p{i}.py" for i in range(OFFENDING_CAP + 7)]
    shown, more = offending_items({"offending_paths": paths})
    assert shown == tuple(paths[:OFFENDING_CAP]) and more == 7


def test_offenders_under_the_cap_have_no_more() -> None:
    assert offending_items({"offending_ids": ["a", "b"]}) == (("a", "b"), 0)


def test_a_census_counts_ids_it_does_not_list() -> None:
    shown, more = offending_items({"offending": {"count": 12, "ids": ["x", "y"]}})
    assert shown == ("x", "y") and more == 10


def test_offenders_merge_keys_in_order_and_name_each_once() -> None:
    md = {
        "ids": ["c"],
        "offending_paths": ["a", "b"],
        "offending_rows": ["b", "d"],
        "skip_reasons": ["not an offender"],
        "count": 3,
    }
    assert offending_items(md) == (("a", "b", "c", "d"), 0)


def test_offenders_from_json_text_and_records() -> None:
    md = {
        "offending_paths": json.dumps(["a.py", "b.py"]),
        "examples": [{"id": "r1"}, {"sourcePath": "c.py"}, {"other": 1}, 5, True, None],
    }
    assert offending_items(md) == (("a.py", "b.py", "r1", "c.py", "5"), 0)


def test_no_offenders() -> None:
    assert offending_items({}) == ((), 0)
    assert offending_items(None) == ((), 0)
    assert offending_items({"offending_paths": "  "}) == ((), 0)
    assert offending_items({"offending_count": 3}) == ((), 0)
    assert offending_items({"offending_paths": "one.py"}) == (("one.py",), 0)


def test_custom_cap() -> None:
    assert offending_items({"ids": ["a", "b", "c"]}, cap=1) == (("a",), 2)
    assert offending_items({"ids": ["a", "b"]}, cap=0) == ((), 2)


# ------------------------------------------------------------------------ links
@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("http://dagster.internal:3000/", "http://dagster.internal:3000/runs/r1"),
        ("https://ops.example.com/dagster", "https://ops.example.com/dagster/runs/r1"),
        (None, f"{DEFAULT_UI_BASE_URL}/runs/r1"),
        ("  ", f"{DEFAULT_UI_BASE_URL}/runs/r1"),
    ],
)
def test_run_url(base, expected) -> None:
    assert run_url(base, "r1") == expected


# ------------------------------------------------------------------------ alerts
def test_failed_check_alert_names_everything_the_operator_needs() -> None:
    alert = alert_from_check(_check(), "http://ui:3000")
    assert alert is not None
    assert alert.kind == ALERT_KIND_CHECK
    assert (alert.tenant_id, alert.repo_slug) == ("acme", "widgets")
    assert alert.subject == "no_hole" and alert.severity == "ERROR"
    assert alert.offending == ("widgets:a.py", "widgets:b.py") and alert.offending_more == 0
    assert alert.run_url == "http://ui:3000/runs/0123456789abcdef"
    assert alert.alert_id == "asset_check:0123456789abcdef:7"
    assert "2 yielded paths lack a complete set" in alert.summary
    assert alert.title == "ERROR check no_hole failed · acme/widgets"
    record = alert.to_record()
    assert record["check"] == "no_hole" and record["job"] is None
    assert record["offending"] == ["widgets:a.py", "widgets:b.py"]
    assert json.loads(json.dumps(record)) == record


def test_passing_check_gives_no_alert() -> None:
    assert alert_from_check(_check(passed=True), None) is None


def test_warn_severity_is_kept_and_an_unknown_one_reads_as_error() -> None:
    assert alert_from_check(_check(severity="WARN"), None).severity == "WARN"
    assert alert_from_check(_check(severity="FATAL"), None).severity == "ERROR"


def test_check_without_description_or_scope() -> None:
    alert = alert_from_check(_check(description=None, partition_key=None, metadata={}), None)
    assert "did not pass" in alert.summary
    assert alert.title.endswith("· no tenant")
    assert alert.run_url == f"{DEFAULT_UI_BASE_URL}/runs/0123456789abcdef"


def test_long_descriptions_are_bounded_on_one_line() -> None:
    alert = alert_from_check(_check(description="x\n" * 5000), None)
    assert len(alert.summary) <= 600 and "\n" not in alert.summary


def test_run_failure_alert() -> None:
    failure = RunFailure(
        event_id=11,
        run_id="feedbeef",
        occurred_at=1.0,
        job_name="sweep",
        partition_key="acme/widgets",
        tenant_tag="acme",
        message="Execution of run failed. Exception: kaboom",
    )
    alert = alert_from_run_failure(failure, None)
    assert alert.kind == ALERT_KIND_RUN and alert.severity == "ERROR"
    assert (alert.tenant_id, alert.repo_slug, alert.subject) == ("acme", "widgets", "sweep")
    assert alert.title == "Run of sweep failed · acme/widgets"
    assert alert.to_record()["job"] == "sweep" and alert.to_record()["check"] is None
    assert "kaboom" in alert.summary and alert.alert_id == "run_failure:feedbeef:11"


def test_run_failure_without_partition_uses_the_tenant_tag() -> None:
    failure = RunFailure(
        event_id=1, run_id="r", occurred_at=0.0, job_name="canary", tenant_tag="acme"
    )
    alert = alert_from_run_failure(failure, None)
    assert (alert.tenant_id, alert.repo_slug) == ("acme", None)
    assert "run failed" in alert.summary


# ------------------------------------------------------------------------ Slack payload
def test_slack_payload_shape() -> None:
    many = [f"widgets:p{i}.py" for i in range(25)]
    alert = alert_from_check(_check(severity="WARN", metadata={"offending_paths": many}), None)
    payload = slack_payload(alert)
    assert set(payload) == {"text", "blocks"}
    assert payload["text"].startswith(":warning: WARN check no_hole failed · acme/widgets")
    types = [b["type"] for b in payload["blocks"]]
    assert types == ["header", "section", "section", "section", "context"]
    fields = [f["text"] for f in payload["blocks"][1]["fields"]]
    assert fields == ["*Tenant*\nacme", "*Repo*\nwidgets", "*Check*\nno_hole", "*Severity*\nWARN"]
    offenders = payload["blocks"][3]["text"]["text"]
    assert "widgets:p19.py" in offenders and "widgets:p20.py" not in offenders
    assert "…and 5 more" in offenders and "*Offending (25)*" in offenders
    link = payload["blocks"][4]["elements"][0]["text"]
    assert link == f"<{DEFAULT_UI_BASE_URL}/runs/0123456789abcdef|Open run 01234567 in Dagster>"
    json.dumps(payload)  # serialisable


def test_slack_payload_without_offenders_and_for_a_run() -> None:
    failure = RunFailure(event_id=1, run_id="r", occurred_at=0.0, job_name="sweep")
    payload = slack_payload(alert_from_run_failure(failure, None))
    assert payload["text"].startswith(":red_circle: Run of sweep failed")
    assert [b["type"] for b in payload["blocks"]] == ["header", "section", "section", "context"]
    assert payload["blocks"][1]["fields"][2]["text"] == "*Job*\nsweep"


def test_slack_payload_respects_slack_limits() -> None:
    long = "n" * 500
    alert = alert_from_check(
        _check(check_name=long, metadata={"offending_ids": ["x" * 400] * 20}), None
    )
    payload = slack_payload(alert)
    assert len(payload["blocks"][0]["text"]["text"]) <= 150
    assert all(len(f["text"]) <= 2000 for f in payload["blocks"][1]["fields"])
    assert len(payload["blocks"][3]["text"]["text"]) <= 3000
    assert len(payload["text"]) <= 3000


# ------------------------------------------------------------------------ order and cursor
def _p(stream: str, event_id: int, alert: bool = True) -> Pending:
    return Pending(
        stream, event_id, alert_from_check(_check(event_id=event_id), None) if alert else None
    )


def test_merge_orders_both_streams_by_event_id() -> None:
    merged = merge_pending(
        {
            STREAM_CHECKS: [_p(STREAM_CHECKS, 3), _p(STREAM_CHECKS, 9)],
            STREAM_RUNS: [_p(STREAM_RUNS, 5)],
        },
        {STREAM_CHECKS: False, STREAM_RUNS: False},
    )
    assert [e.event_id for e in merged] == [3, 5, 9]


def test_merge_cuts_at_the_end_of_a_truncated_stream() -> None:
    merged = merge_pending(
        {
            STREAM_CHECKS: [_p(STREAM_CHECKS, 3), _p(STREAM_CHECKS, 4)],
            STREAM_RUNS: [_p(STREAM_RUNS, 2), _p(STREAM_RUNS, 8)],
        },
        {STREAM_CHECKS: True, STREAM_RUNS: False},
    )
    # checks may hold more events after 4 that precede the run failure at 8
    assert [e.event_id for e in merged] == [2, 3, 4]


def test_merge_of_nothing() -> None:
    assert merge_pending({STREAM_CHECKS: [], STREAM_RUNS: []}, {STREAM_CHECKS: True}) == []


def test_cursor_advances_per_stream_over_handled_events_only() -> None:
    cursor = AlertCursor(since=100.0, after={STREAM_CHECKS: 2})
    moved = advance_cursor(cursor, [_p(STREAM_CHECKS, 3, alert=False), _p(STREAM_RUNS, 5)])
    assert moved == AlertCursor(since=100.0, after={STREAM_CHECKS: 3, STREAM_RUNS: 5})
    assert advance_cursor(moved, []) == moved
    # never backwards
    assert advance_cursor(moved, [_p(STREAM_CHECKS, 1)]).after[STREAM_CHECKS] == 3


def test_initial_cursor_looks_back() -> None:
    assert initial_cursor(1000.0, 600.0) == AlertCursor(since=400.0, after={})
    assert initial_cursor(1000.0, -5.0).since == 1000.0


def test_cursor_round_trip() -> None:
    cursor = AlertCursor(since=12.5, after={STREAM_CHECKS: 4, STREAM_RUNS: 9})
    assert parse_cursor(encode_cursor(cursor)) == cursor
    assert parse_cursor(encode_cursor(AlertCursor(since=1.0))) == AlertCursor(since=1.0)


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "not json",
        "[]",
        json.dumps({"after": {}}),
        json.dumps({"since": True, "after": {}}),
        json.dumps({"since": "12", "after": {}}),
        json.dumps({"since": 1.0, "after": []}),
        json.dumps({"since": 1.0, "after": {"checks": "4"}}),
        json.dumps({"since": 1.0, "after": {"checks": True}}),
        json.dumps({"since": 1.0, "after": {"other": 4}}),
        '{"since": NaN, "after": {}}',
    ],
)
def test_unreadable_cursor_reads_as_none(text) -> None:
    assert parse_cursor(text) is None


# ------------------------------------------------------------------------ backoff
def test_retry_delays_grow_and_cap() -> None:
    assert retry_delays(4, 0.5, 2.0, 2.0) == (0.5, 1.0, 2.0, 2.0)
    assert retry_delays(3, 1.0) == (1.0, 2.0, 4.0)
    assert retry_delays(0, 1.0) == ()
    assert retry_delays(2, -1.0) == (0.0, 0.0)
    assert retry_delays(3, 1.0, 0.5) == (1.0, 1.0, 1.0)  # never shrinks


def test_retry_wait_is_bounded_by_retries_and_budget() -> None:
    delays = (0.5, 1.0, 2.0)
    assert retry_wait(delays, 1, 0.0, 30.0) == 0.5
    assert retry_wait(delays, 3, 0.0, 30.0) == 2.0
    assert retry_wait(delays, 4, 0.0, 30.0) is None  # retries spent
    assert retry_wait(delays, 0, 0.0, 30.0) is None
    assert retry_wait(delays, 2, 29.5, 30.0) is None  # would end past the budget
    assert retry_wait(delays, 2, 29.0, 30.0) == 1.0


# ------------------------------------------------------------------------ actionable
CONTAINMENT_SUMMARY = (
    "**acme**: 40 rows in the collection, **0** violating containment; the executed plan "
    "held 0 rows of another tenant; a tenant-scoped query returned 0 rows of another "
    "tenant.\n\n**Retired, not a breach**: `acme/gadgets` 6 rows wait for reclamation "
    "(they left tenants.yaml).\n\nretired-repo paths:\n\n- `gadgets:g.py`\n- `gadgets:README.md`"
)


def test_an_alert_says_the_checks_own_summary_paths_first_and_the_repo() -> None:
    ev = _check(
        check_name="tenant_containment",
        severity="WARN",
        partition_key="acme",  # a tenant partition: no repo in it
        description="Tenant containment: every row carries a valid tenantId…",
        metadata={
            "summary": CONTAINMENT_SUMMARY,
            "offending_ids": {"count": 0, "ids": []},
            "offending_paths": {"count": 0, "ids": []},
            "offending_retired_paths": ["gadgets:README.md", "gadgets:g.py"],
        },
    )
    alert = alert_from_check(ev, None)
    # Which rule, how many rows, what was retired and how many rows wait: the check's
    # words, not its description, and no markdown or offender list inside.
    assert alert.summary.startswith("tenant_containment on kb_reconciliation: acme: 40 rows")
    assert "Retired, not a breach: acme/gadgets 6 rows wait for reclamation" in alert.summary
    assert "**" not in alert.summary and "- " not in alert.summary
    assert alert.offending == ("gadgets:README.md", "gadgets:g.py")
    assert (alert.tenant_id, alert.repo_slug) == ("acme", "gadgets")


def test_paths_come_before_ids_and_several_repos_name_no_single_repo() -> None:
    ev = _check(
        partition_key="acme",
        metadata={
            "offending_ids": {"count": 3, "ids": ["id1"]},
            "offending_paths": {"count": 2, "ids": ["widgets:a.py", "tools:b.py"]},
        },
    )
    alert = alert_from_check(ev, None)
    assert alert.offending[:2] == ("widgets:a.py", "tools:b.py")
    assert alert.offending_more == 2
    assert alert.repo_slug is None
