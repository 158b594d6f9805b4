"""The alert sensor on a real instance: real failed checks and a real failed run, delivered
once each, to the JSONL file and to a real webhook server on 127.0.0.1.
"""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from neo_assets.alerts.defs import asset_check_alert_sensor
from neo_assets.alerts.rules import STREAM_CHECKS, STREAM_RUNS, parse_cursor
from neo_assets.alerts.sinks import ALERTS_FILE, WEBHOOK_JOURNAL_FILE
from neo_assets.defs.partitions import TENANT_REPOS, tenant_repos
from neo_assets.defs.resources import default_resources

PARTITION = "acme/widgets"
OFFENDERS = [f"widgets:src/m{i:02d}.py" for i in range(25)]


@dg.asset(partitions_def=tenant_repos)
def probe_rows() -> int:
    return 3


@dg.asset_check(asset=probe_rows, name="no_hole_probe")
def no_hole_probe() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=False,
        severity=dg.AssetCheckSeverity.ERROR,
        description="25 yielded paths lack a complete set of rows",
        metadata={"offending_paths": OFFENDERS, "offending_count": len(OFFENDERS)},
    )


@dg.asset_check(asset=probe_rows, name="residue_probe")
def residue_probe() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=False,
        severity=dg.AssetCheckSeverity.WARN,
        description="40% of rows carry a superseded parser identity",
        metadata={"residue_share": 0.4, "offending_ids": ["id-1", "id-2"]},
    )


@dg.asset_check(asset=probe_rows, name="fine_probe")
def fine_probe() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True)


@dg.asset(partitions_def=tenant_repos)
def broken_rows() -> int:
    raise RuntimeError("the store is on fire")


@pytest.fixture(scope="module")
def instance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One instance holding two real runs: failed checks (ERROR, WARN), a passed check,
    and a failed run. Each test reads it with its own sensor cursor and NEO_HOME.
    """
    home = tmp_path_factory.mktemp("alert-dagster")
    inst = dg.DagsterInstance.local_temp(str(home))
    inst.add_dynamic_partitions(TENANT_REPOS, [PARTITION])
    checks = dg.materialize(
        [probe_rows, no_hole_probe, residue_probe, fine_probe],
        instance=inst,
        partition_key=PARTITION,
        tags={"neo/tenant": "acme"},
    )
    assert checks.success  # non-blocking checks: the run itself succeeds
    broken = dg.materialize(
        [broken_rows], instance=inst, partition_key=PARTITION, raise_on_error=False
    )
    assert not broken.success
    yield {"instance": inst, "checks_run": checks.run_id, "broken_run": broken.run_id}
    inst.dispose()


def _tick(instance: dg.DagsterInstance, cursor: str | None) -> dg.SensorResult:
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources=default_resources()
    ) as ctx:
        return asset_check_alert_sensor(ctx)


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_each_failure_is_written_once_to_the_jsonl_file(instance, neo_home: Path) -> None:
    first = _tick(instance["instance"], None)
    alerts = _lines(neo_home / ALERTS_FILE)
    assert sorted((a["kind"], a["check"] or a["job"], a["severity"]) for a in alerts) == [
        ("asset_check", "no_hole_probe", "ERROR"),
        ("asset_check", "residue_probe", "WARN"),
        ("run_failure", "__ephemeral_asset_job__", "ERROR"),
    ]
    # in event order: the checks ran before the broken run
    assert [a["eventId"] for a in alerts] == sorted(a["eventId"] for a in alerts)
    assert alerts[-1]["kind"] == "run_failure"
    by_subject = {a["check"] or a["job"]: a for a in alerts}
    hole = by_subject["no_hole_probe"]
    assert (hole["tenantId"], hole["repoSlug"], hole["partitionKey"]) == (
        "acme",
        "widgets",
        PARTITION,
    )
    assert hole["offending"] == OFFENDERS[:20] and hole["offendingMore"] == 5
    assert hole["runUrl"] == f"http://127.0.0.1:3000/runs/{instance['checks_run']}"
    assert "25 yielded paths" in hole["summary"]
    residue = by_subject["residue_probe"]
    assert residue["severity"] == "WARN" and residue["offending"] == ["id-1", "id-2"]
    run = by_subject["__ephemeral_asset_job__"]
    assert run["runId"] == instance["broken_run"] and run["repoSlug"] == "widgets"
    assert "the store is on fire" in run["summary"]
    assert "fine_probe" not in by_subject

    assert first.skip_reason.skip_message == "3 alert(s) delivered to jsonl"
    cursor = parse_cursor(first.cursor)
    assert cursor is not None and set(cursor.after) == {STREAM_CHECKS, STREAM_RUNS}
    second = _tick(instance["instance"], first.cursor)
    assert len(_lines(neo_home / ALERTS_FILE)) == 3
    assert second.skip_reason is not None and "no new failure" in second.skip_reason.skip_message
    assert second.cursor == first.cursor


def test_a_lost_cursor_does_not_duplicate_a_delivery(instance, neo_home: Path) -> None:
    # The process died after delivering and before Dagster stored the tick's cursor: the
    # next tick starts from the old (here: no) cursor and meets the same events again.
    _tick(instance["instance"], None)
    again = _tick(instance["instance"], None)
    assert len(_lines(neo_home / ALERTS_FILE)) == 3
    assert parse_cursor(again.cursor).after  # the cursor catches up all the same


def test_the_ui_link_follows_the_setting(instance, neo_home: Path, monkeypatch) -> None:
    monkeypatch.setenv("NEO_UI_BASE_URL", "https://dagster.example.com/")
    _tick(instance["instance"], None)
    urls = {a["runUrl"] for a in _lines(neo_home / ALERTS_FILE)}
    assert urls == {
        f"https://dagster.example.com/runs/{instance['checks_run']}",
        f"https://dagster.example.com/runs/{instance['broken_run']}",
    }


class _Webhook:
    """A real HTTP server on 127.0.0.1 answering each POST with the next scripted status."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.statuses: list[int] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status = outer.statuses.pop(0) if outer.statuses else 200
                outer.received.append({"status": status, "payload": json.loads(body)})
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok" if status == 200 else b"no")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def delivered(self) -> list[dict[str, Any]]:
        return [r["payload"] for r in self.received if r["status"] == 200]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook(neo_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Webhook]:
    hook = _Webhook()
    monkeypatch.setenv("NEO_ALERT_WEBHOOK_URL", hook.url)
    yield hook
    hook.close()


def test_a_failing_webhook_holds_the_cursor_and_the_next_tick_delivers(
    instance, webhook: _Webhook, neo_home: Path
) -> None:
    webhook.statuses = [500] * 4  # every attempt of this tick fails
    failed = _tick(instance["instance"], None)
    assert [r["status"] for r in webhook.received] == [500] * 4  # one alert, retried
    first_attempted = {r["payload"]["text"] for r in webhook.received}
    assert len(first_attempted) == 1  # nothing behind it was tried
    held = parse_cursor(failed.cursor)
    assert held is not None and held.after.get(STREAM_RUNS) is None
    message = failed.skip_reason.skip_message
    assert message.startswith("0 alert(s) delivered to webhook; alert ")
    assert "not delivered: webhook answered HTTP 500" in message
    # the three alerts wait (and the passed check too, when it came after the first alert)
    assert "3 event(s) wait" in message or "4 event(s) wait" in message
    assert not (neo_home / ALERTS_FILE).exists()  # no silent fallback to the file

    webhook.statuses = [503]  # one more hiccup: retried within the tick
    delivered = _tick(instance["instance"], failed.cursor)
    payloads = webhook.delivered()
    assert len(payloads) == 3
    assert payloads[0]["text"] in first_attempted  # the held alert goes first
    for payload in payloads:
        assert set(payload) == {"text", "blocks"}
        assert payload["blocks"][0]["type"] == "header"
        assert payload["blocks"][-1]["type"] == "context"
    hole = next(p for p in payloads if "no_hole_probe" in p["text"])
    fields = [f["text"] for f in hole["blocks"][1]["fields"]]
    assert fields == [
        "*Tenant*\nacme",
        "*Repo*\nwidgets",
        "*Check*\nno_hole_probe",
        "*Severity*\nERROR",
    ]
    listing = hole["blocks"][3]["text"]["text"]
    assert OFFENDERS[19] in listing and OFFENDERS[20] not in listing and "…and 5 more" in listing
    assert f"/runs/{instance['checks_run']}|" in hole["blocks"][-1]["elements"][0]["text"]
    assert len(_lines(neo_home / WEBHOOK_JOURNAL_FILE)) == 3

    quiet = _tick(instance["instance"], delivered.cursor)
    assert len(webhook.received) == 4 + 1 + 3
    assert quiet.cursor == delivered.cursor


def test_an_unreachable_webhook_is_retried_then_left_pending(
    instance, neo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = _Webhook()
    url = hook.url
    hook.close()  # nothing listens there any more: connection refused
    monkeypatch.setenv("NEO_ALERT_WEBHOOK_URL", url)
    result = _tick(instance["instance"], None)
    assert parse_cursor(result.cursor).after.get(STREAM_RUNS) is None
    assert "ConnectError" in result.skip_reason.skip_message
    assert "after 4 attempt(s)" in result.skip_reason.skip_message
