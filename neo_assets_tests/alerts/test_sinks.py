"""The sinks' journals and the delivery loop's order, retries and budget."""

import json
from pathlib import Path

import pytest

from neo_assets.alerts.delivery import deliver_in_order
from neo_assets.alerts.rules import STREAM_CHECKS, CheckEvaluation, Pending, alert_from_check
from neo_assets.alerts.sinks import (
    ALERTS_FILE,
    WEBHOOK_JOURNAL_FILE,
    DeliveryError,
    JsonlSink,
    WebhookSink,
    append_line,
    recent_alert_ids,
    sink_from_settings,
)
from neo_assets.config.settings import load_settings


def _alert(event_id: int):
    return alert_from_check(
        CheckEvaluation(
            event_id=event_id,
            run_id="run",
            occurred_at=0.0,
            asset_key="a",
            check_name="no_hole",
            passed=False,
            severity="ERROR",
            partition_key="acme/widgets",
        ),
        None,
    )


def _pending(*ids: int, passing: tuple[int, ...] = ()) -> list[Pending]:
    return [Pending(STREAM_CHECKS, i, None if i in passing else _alert(i)) for i in ids]


def test_jsonl_sink_appends_once_per_alert(tmp_path: Path) -> None:
    path = tmp_path / "alerts.jsonl"
    assert JsonlSink(path, clock=lambda: 5.0).deliver(_alert(1)) is True
    assert JsonlSink(path).deliver(_alert(1)) is False  # a later sink reads the journal
    sink = JsonlSink(path)
    assert sink.deliver(_alert(2)) is True and sink.deliver(_alert(2)) is False
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["alertId"] for x in lines] == ["asset_check:run:1", "asset_check:run:2"]
    assert lines[0]["deliveredAt"] == 5.0 and lines[0]["repoSlug"] == "widgets"


def test_a_torn_last_line_records_nothing_and_the_next_append_starts_clean(tmp_path: Path) -> None:
    path = tmp_path / "alerts.jsonl"
    append_line(path, {"alertId": "x"})
    with path.open("ab") as fh:
        fh.write(b'{"alertId": "torn"')  # a crash mid-append
    assert recent_alert_ids(path) == {"x"}
    append_line(path, {"alertId": "y"})
    assert recent_alert_ids(path) == {"x", "y"}


def test_recent_ids_read_only_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    for i in range(100):
        append_line(path, {"alertId": f"id-{i:03d}"})
    tail = recent_alert_ids(path, tail_bytes=200)
    assert "id-099" in tail and "id-000" not in tail and len(tail) < 20
    assert recent_alert_ids(tmp_path / "missing.jsonl") == set()


def test_an_unreadable_journal_is_a_delivery_error(tmp_path: Path) -> None:
    (tmp_path / "alerts.jsonl").mkdir()  # a directory where the file should be
    with pytest.raises(DeliveryError, match="cannot read the journal"):
        JsonlSink(tmp_path / "alerts.jsonl").deliver(_alert(1))


def test_sink_from_settings(neo_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sink = sink_from_settings(load_settings())
    assert isinstance(sink, JsonlSink) and sink.path == neo_home.resolve() / ALERTS_FILE
    monkeypatch.setenv("NEO_ALERT_WEBHOOK_URL", "http://127.0.0.1:9/hook")
    hook = sink_from_settings(load_settings())
    assert isinstance(hook, WebhookSink) and hook.url == "http://127.0.0.1:9/hook"
    assert hook.journal == neo_home.resolve() / WEBHOOK_JOURNAL_FILE
    monkeypatch.setenv("NEO_ALERT_WEBHOOK_URL", "  ")
    assert isinstance(sink_from_settings(load_settings()), JsonlSink)


class _Scripted:
    """A sink that fails while its script says so (what a flaky receiver does)."""

    name = "scripted"

    def __init__(self, failures: dict[int, int]) -> None:
        self.failures = dict(failures)  # event id -> failed attempts before success
        self.calls: list[int] = []

    def deliver(self, alert) -> bool:
        self.calls.append(alert.event_id)
        if self.failures.get(alert.event_id, 0) > 0:
            self.failures[alert.event_id] -= 1
            raise DeliveryError("receiver said no")
        return True


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_delivers_in_order_and_retries_with_backoff() -> None:
    sink, clock = _Scripted({2: 2}), _Clock()
    report = deliver_in_order(
        _pending(1, 2, 3, passing=(3,)),
        sink,
        delays=(0.5, 1.0, 2.0),
        clock=clock,
        sleep=clock.sleep,
    )
    assert sink.calls == [1, 2, 2, 2]
    assert clock.slept == [0.5, 1.0]
    assert [p.event_id for p in report.handled] == [1, 2, 3]
    assert report.delivered == ["asset_check:run:1", "asset_check:run:2"]
    assert report.failed is None and report.attempts == 4


def test_stops_at_the_first_undeliverable_alert() -> None:
    sink, clock = _Scripted({2: 99}), _Clock()
    report = deliver_in_order(
        _pending(1, 2, 3), sink, delays=(0.5, 1.0), clock=clock, sleep=clock.sleep
    )
    assert sink.calls == [1, 2, 2, 2]  # 3 never tried: it waits behind 2
    assert [p.event_id for p in report.handled] == [1]
    assert report.failed.event_id == 2 and "after 3 attempt(s)" in report.error


def test_the_tick_budget_bounds_retries_and_new_alerts() -> None:
    sink, clock = _Scripted({1: 99}), _Clock()
    report = deliver_in_order(
        _pending(1), sink, delays=(5.0, 5.0, 5.0), budget_s=7.0, clock=clock, sleep=clock.sleep
    )
    assert clock.slept == [5.0] and report.failed is not None  # the second wait would overrun

    clock = _Clock()

    class Slow(_Scripted):
        def deliver(self, alert) -> bool:
            clock.now += 4.0
            return super().deliver(alert)

    slow = Slow({})
    report = deliver_in_order(_pending(1, 2, 3), slow, budget_s=7.0, clock=clock)
    assert slow.calls == [1, 2] and report.out_of_time and report.failed is None
    assert [p.event_id for p in report.handled] == [1, 2]


def test_repeats_are_handled_not_redelivered(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path / "a.jsonl")
    sink.deliver(_alert(1))
    report = deliver_in_order(_pending(1, 2), JsonlSink(tmp_path / "a.jsonl"))
    assert report.repeats == ["asset_check:run:1"] and report.delivered == ["asset_check:run:2"]
    assert [p.event_id for p in report.handled] == [1, 2]
