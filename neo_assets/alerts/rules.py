"""Alerts as plain data: a failed check evaluation or run as one ``Alert`` naming tenant,
repo, check, severity, at most ``OFFENDING_CAP`` offenders and the run's link
(``slack_payload`` renders it); and delivery order and cursor rules. Pure."""

import contextlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from neo_assets.core.ids.partition_keys import parse_partition_key

ALERT_KIND_CHECK = "asset_check"
ALERT_KIND_RUN = "run_failure"

SEVERITY_ERROR = "ERROR"
SEVERITY_WARN = "WARN"
SEVERITIES = frozenset({SEVERITY_ERROR, SEVERITY_WARN})

STREAM_CHECKS = "checks"
STREAM_RUNS = "runs"
STREAMS = (STREAM_CHECKS, STREAM_RUNS)

# Where `make dev` serves the UI (its UI_PORT default); NEO_UI_BASE_URL says otherwise.
DEFAULT_UI_BASE_URL = "http://127.0.0.1:3000"
OFFENDING_CAP = 20
# Metadata keys that name offenders, most specific first. Any other key starting with
# "offending" counts too, so a check can name its own (``offending_rows``...).
OFFENDING_KEYS = ("offending_paths", "offending_ids", "offending", "paths", "ids", "examples")
_TENANT_KEYS = ("tenantId", "tenant_id", "tenant")
_REPO_KEYS = ("repoSlug", "repo_slug", "repo")

# Slack's limits (header text 150, section text 3000, field 2000 characters).
_HEADER_MAX = 150
_SECTION_MAX = 3000
_FIELD_MAX = 2000
_SUMMARY_MAX = 600


@dataclass(frozen=True)
class CheckEvaluation:
    """One asset-check evaluation as read from the event log (metadata as plain values)."""

    event_id: int
    run_id: str
    occurred_at: float
    asset_key: str
    check_name: str
    passed: bool
    severity: str
    partition_key: str | None = None
    description: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunFailure:
    """One failed run as read from the event log and the run's tags."""

    event_id: int
    run_id: str
    occurred_at: float
    job_name: str
    partition_key: str | None = None
    tenant_tag: str | None = None
    message: str = ""


@dataclass(frozen=True)
class Alert:
    alert_id: str  # unique per event, stable across restarts: "<kind>:<runId>:<eventId>"
    kind: str
    event_id: int
    occurred_at: float
    severity: str
    tenant_id: str | None
    repo_slug: str | None
    subject: str  # the check name, or the job name of a failed run
    partition_key: str | None
    summary: str
    run_id: str
    run_url: str
    asset_key: str | None = None  # a failed run names no asset, nor offenders
    offending: tuple[str, ...] = ()
    offending_more: int = 0

    @property
    def title(self) -> str:
        scope = scope_label(self.tenant_id, self.repo_slug)
        if self.kind == ALERT_KIND_CHECK:
            return f"{self.severity} check {self.subject} failed · {scope}"
        return f"Run of {self.subject} failed · {scope}"

    def to_record(self) -> dict[str, Any]:
        """The alert as one JSON object (a line of alerts.jsonl; camelCase like the CLI)."""
        return {
            "alertId": self.alert_id,
            "kind": self.kind,
            "eventId": self.event_id,
            "occurredAt": self.occurred_at,
            "severity": self.severity,
            "tenantId": self.tenant_id,
            "repoSlug": self.repo_slug,
            "check": self.subject if self.kind == ALERT_KIND_CHECK else None,
            "job": self.subject if self.kind == ALERT_KIND_RUN else None,
            "assetKey": self.asset_key,
            "partitionKey": self.partition_key,
            "title": self.title,
            "summary": self.summary,
            "offending": list(self.offending),
            "offendingMore": self.offending_more,
            "runId": self.run_id,
            "runUrl": self.run_url,
        }


# ------------------------------------------------------------------------ building alerts
def run_url(ui_base_url: str | None, run_id: str) -> str:
    base = (ui_base_url or "").strip().rstrip("/") or DEFAULT_UI_BASE_URL
    return f"{base}/runs/{run_id}"


def scope_label(tenant_id: str | None, repo_slug: str | None) -> str:
    if tenant_id and repo_slug:
        return f"{tenant_id}/{repo_slug}"
    return tenant_id or "no tenant"


def alert_scope(
    partition_key: str | None, metadata: Mapping[str, Any] | None = None
) -> tuple[str | None, str | None]:
    """(tenantId, repoSlug): the partition key first (``t/r`` or ``t``; it scoped the run), then
    metadata. A key of another shape is ignored rather than guessed at."""
    tenant: str | None = None
    repo: str | None = None
    if partition_key:
        with contextlib.suppress(ValueError):
            if "/" in partition_key:
                tenant, repo = parse_partition_key(partition_key)
            else:
                tenant, _ = parse_partition_key(f"{partition_key}/x")
    md = metadata or {}
    if tenant is None:
        tenant = _first_str(md, _TENANT_KEYS)
    if repo is None:
        repo = _first_str(md, _REPO_KEYS)
    return tenant, repo


def _first_str(md: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = md.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def offending_items(
    metadata: Mapping[str, Any] | None, cap: int = OFFENDING_CAP
) -> tuple[tuple[str, ...], int]:
    """At most ``cap`` offending paths/ids named by the metadata (``OFFENDING_KEYS`` first; a
    list, a string or a census whose count may exceed its ids), and how many more exist."""
    md = metadata or {}
    keys = [k for k in OFFENDING_KEYS if k in md]
    keys += sorted(k for k in md if k.lower().startswith("offending") and k not in keys)
    seen: dict[str, None] = {}
    unlisted = 0
    for key in keys:
        names, extra = _offenders_of(md[key])
        unlisted += extra
        for name in names:
            seen.setdefault(name, None)
    items = list(seen)
    shown = tuple(items[: max(cap, 0)])
    return shown, len(items) - len(shown) + unlisted


def _offenders_of(value: Any) -> tuple[list[str], int]:
    if isinstance(value, str):
        if value.strip()[:1] in "[{":  # a list or a census, as JSON text
            with contextlib.suppress(ValueError):
                return _offenders_of(json.loads(value))
        return ([value] if value.strip() else []), 0
    if isinstance(value, Mapping):
        ids = value.get("ids", value.get("paths"))
        names, _ = _offenders_of(ids) if ids is not None else ([], 0)
        count = value.get("count")
        extra = 0
        if isinstance(count, int) and not isinstance(count, bool) and count > len(names):
            extra = count - len(names)
        return names, extra
    if isinstance(value, list | tuple | set | frozenset):
        names = []
        for item in value:
            if isinstance(item, str | int) and not isinstance(item, bool):
                names.append(str(item))
            elif isinstance(item, Mapping):
                label = item.get("id") or item.get("path") or item.get("sourcePath")
                if isinstance(label, str):
                    names.append(label)
        return names, 0
    return [], 0


def _bounded(text: str, limit: int) -> str:
    return _clip(" ".join(text.split()), limit)


def check_summary(metadata: Mapping[str, Any] | None) -> str | None:
    """The check's own summary (its ``summary`` metadata, markdown) as one plain line: its
    prose paragraphs, without the lists of offenders (the alert lists those itself)."""
    text = (metadata or {}).get("summary")
    if not isinstance(text, str) or not text.strip():
        return None
    kept = []
    for paragraph in re.split(r"\n\s*\n", text):
        para = paragraph.strip()
        if not para or para.startswith(("- ", "|")) or para.endswith(":"):
            continue
        kept.append(para.replace("**", "").replace("`", ""))
    return " ".join(kept) or None


def repo_of_offenders(offending: Iterable[str]) -> str | None:
    """The one repo slug every ``slug:path`` offender names (None: none, or several)."""
    slugs = {item.split(":", 1)[0] for item in offending if ":" in item}
    slugs.discard("unlocatable")
    return slugs.pop() if len(slugs) == 1 else None


def alert_from_check(ev: CheckEvaluation, ui_base_url: str | None) -> Alert | None:
    """The alert for a failed evaluation; None when it passed (nothing to tell). Its
    summary is the check's own (which rule, how many rows, which repo), else the check's
    description; its repo is the partition's, the metadata's, or the one repo all the
    offending paths name."""
    if ev.passed:
        return None
    severity = ev.severity if ev.severity in SEVERITIES else SEVERITY_ERROR
    tenant, repo = alert_scope(ev.partition_key, ev.metadata)
    offending, more = offending_items(ev.metadata)
    if repo is None:
        repo = repo_of_offenders(offending)
    detail = (
        check_summary(ev.metadata) or (ev.description or "").strip() or "the check did not pass"
    )
    summary = _bounded(f"{ev.check_name} on {ev.asset_key}: {detail}", _SUMMARY_MAX)
    return Alert(
        alert_id=f"{ALERT_KIND_CHECK}:{ev.run_id}:{ev.event_id}",
        kind=ALERT_KIND_CHECK,
        event_id=ev.event_id,
        occurred_at=ev.occurred_at,
        severity=severity,
        tenant_id=tenant,
        repo_slug=repo,
        subject=ev.check_name,
        asset_key=ev.asset_key,
        partition_key=ev.partition_key,
        summary=summary,
        offending=offending,
        offending_more=more,
        run_id=ev.run_id,
        run_url=run_url(ui_base_url, ev.run_id),
    )


def alert_from_run_failure(rf: RunFailure, ui_base_url: str | None) -> Alert:
    tenant, repo = alert_scope(rf.partition_key)
    if tenant is None and rf.tenant_tag:
        tenant = rf.tenant_tag
    detail = (rf.message or "").strip() or "the run failed"
    return Alert(
        alert_id=f"{ALERT_KIND_RUN}:{rf.run_id}:{rf.event_id}",
        kind=ALERT_KIND_RUN,
        event_id=rf.event_id,
        occurred_at=rf.occurred_at,
        severity=SEVERITY_ERROR,
        tenant_id=tenant,
        repo_slug=repo,
        subject=rf.job_name,
        partition_key=rf.partition_key,
        summary=_bounded(detail, _SUMMARY_MAX),
        run_id=rf.run_id,
        run_url=run_url(ui_base_url, rf.run_id),
    )


def slack_payload(alert: Alert) -> dict[str, Any]:
    """Slack-shaped JSON: ``text`` (the notification fallback) and Block Kit ``blocks``."""
    icon = ":red_circle:" if alert.severity == SEVERITY_ERROR else ":warning:"
    subject_label = "Check" if alert.kind == ALERT_KIND_CHECK else "Job"
    fields = [
        ("Tenant", alert.tenant_id or "—"),
        ("Repo", alert.repo_slug or "—"),
        (subject_label, alert.subject),
        ("Severity", alert.severity),
    ]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _clip(alert.title, _HEADER_MAX)}},
        {
            "type": "section",
            "fields": [
                {"type": "mrkdwn", "text": _clip(f"*{name}*\n{value}", _FIELD_MAX)}
                for name, value in fields
            ],
        },
        {"type": "section", "text": {"type": "mrkdwn", "text": _clip(alert.summary, _SECTION_MAX)}},
    ]
    if alert.offending or alert.offending_more:
        listing = "\n".join(alert.offending)
        more = f"\n…and {alert.offending_more} more" if alert.offending_more else ""
        body = f"*Offending ({len(alert.offending) + alert.offending_more})*\n"
        body += f"```{listing}```" if listing else ""
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": _clip(body + more, _SECTION_MAX)},
            }
        )
    blocks.append(
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": f"<{alert.run_url}|Open run {alert.run_id[:8]} in Dagster>",
                },
                # The id lets a receiver recognise a repeat.
                {"type": "mrkdwn", "text": f"alert `{alert.alert_id}`"},
            ],
        }
    )
    text = f"{icon} {alert.title}: {alert.summary}"
    return {"text": _clip(text, _SECTION_MAX), "blocks": blocks}


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ------------------------------------------------------------------------ order and cursor
@dataclass(frozen=True)
class Pending:
    """One event of a stream; ``alert`` is None when there is nothing to deliver."""

    stream: str
    event_id: int
    alert: Alert | None


@dataclass(frozen=True)
class AlertCursor:
    """Per stream, the last event id handled; ``since`` bounds the first read of a stream."""

    since: float
    after: Mapping[str, int] = field(default_factory=dict)


def initial_cursor(now: float, lookback_s: float) -> AlertCursor:
    """Where a sensor with no cursor starts: failures of the last ``lookback_s`` seconds, so
    turning it on after a bad night still tells about it without replaying history."""
    return AlertCursor(since=now - max(lookback_s, 0.0), after={})


def encode_cursor(cursor: AlertCursor) -> str:
    return json.dumps({"since": cursor.since, "after": dict(cursor.after)}, sort_keys=True)


def parse_cursor(text: str | None) -> AlertCursor | None:
    """The cursor, or None when absent or unreadable (the caller starts afresh)."""
    if not text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    since = doc.get("since")
    after = doc.get("after", {})
    if isinstance(since, bool) or not isinstance(since, int | float) or not math.isfinite(since):
        return None
    if not isinstance(after, dict):
        return None
    ids: dict[str, int] = {}
    for stream, value in after.items():
        if stream not in STREAMS or isinstance(value, bool) or not isinstance(value, int):
            return None
        ids[stream] = value
    return AlertCursor(since=float(since), after=ids)


def merge_pending(
    batches: Mapping[str, Sequence[Pending]], full: Mapping[str, bool]
) -> list[Pending]:
    """All streams' events in event order, cut where a truncated (``full``) stream's read ended:
    later events of other streams wait for the next tick."""
    bound = math.inf
    for stream, events in batches.items():
        if full.get(stream) and events:
            bound = min(bound, max(e.event_id for e in events))
    merged = [e for events in batches.values() for e in events if e.event_id <= bound]
    merged.sort(key=lambda e: (e.event_id, e.stream))
    return merged


def advance_cursor(cursor: AlertCursor, handled: Iterable[Pending]) -> AlertCursor:
    """Each stream's cursor moves to the last event handled in it, never backwards."""
    after = dict(cursor.after)
    for event in handled:
        if event.event_id > after.get(event.stream, -1):
            after[event.stream] = event.event_id
    return AlertCursor(since=cursor.since, after=after)


# ------------------------------------------------------------------------ retry backoff
def retry_delays(
    retries: int, initial_s: float, factor: float = 2.0, cap_s: float = math.inf
) -> tuple[float, ...]:
    """The waits before retry 1..``retries``: initial, initial×factor, …, each ≤ cap."""
    if retries <= 0:
        return ()
    out = []
    delay = max(initial_s, 0.0)
    for _ in range(retries):
        out.append(min(delay, cap_s))
        delay *= max(factor, 1.0)
    return tuple(out)


def retry_wait(
    delays: Sequence[float], failures: int, elapsed_s: float, budget_s: float
) -> float | None:
    """How long to wait after the ``failures``-th failed attempt of one alert; None once retries
    are spent or the wait would pass the tick's budget (the next tick starts over)."""
    wait = delays[failures - 1] if 1 <= failures <= len(delays) else None
    return None if wait is None or elapsed_s + wait > budget_s else wait
