"""Where alerts go: a Slack-shaped webhook when NEO_ALERT_WEBHOOK_URL is set, else
``$NEO_HOME/alerts.jsonl``. Each sink is idempotent by alert id, closing the gap when a
process dies between a delivery and the cursor's commit."""

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import httpx

from neo_assets.alerts.rules import Alert, slack_payload
from neo_assets.config.settings import Settings

ALERTS_FILE = "alerts.jsonl"
WEBHOOK_JOURNAL_FILE = "alerts-webhook-sent.jsonl"
WEBHOOK_TIMEOUT_S = 5.0
# The cursor lags a delivery by at most one tick, so the recent tail of a journal is
# enough to recognise a repeat; reading it stays cheap as the file grows.
JOURNAL_TAIL_BYTES = 1 << 20


class DeliveryError(Exception):
    """The sink could not deliver the alert (the message says why); it may be retried."""


class AlertSink(Protocol):
    name: str

    def deliver(self, alert: Alert) -> bool:
        """Deliver once: True when delivered now, False when it was delivered before.

        Raises DeliveryError when it could not be delivered.
        """
        ...


def recent_alert_ids(path: Path, tail_bytes: int = JOURNAL_TAIL_BYTES) -> set[str]:
    """The alert ids recorded in the last ``tail_bytes`` of a JSONL journal."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(size - tail_bytes, 0))
            data = fh.read()
    except FileNotFoundError:
        return set()
    lines = data.split(b"\n")
    if len(data) < size:
        lines = lines[1:]  # the first line of a partial tail is cut
    ids = set()
    for line in lines:
        try:
            doc = json.loads(line)
        except ValueError:
            continue  # a torn last line (crash mid-append) records nothing
        if isinstance(doc, dict) and isinstance(doc.get("alertId"), str):
            ids.add(doc["alertId"])
    return ids


def append_line(path: Path, doc: dict[str, Any]) -> None:
    """Append one JSON line and fsync it, so a recorded delivery survives a crash."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(doc, sort_keys=True, default=str) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        # A torn previous line would swallow this one: start on a fresh line.
        if os.fstat(fd).st_size and not _ends_with_newline(path):
            data = b"\n" + data
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


class _DeliversOnce:
    """A sink that delivers each alert once: the ids its journal recorded, read once per
    sink (one sink serves one tick), are never sent again; ``_send`` delivers one."""

    def __init__(self, journal: Path) -> None:
        self.journal = Path(journal)
        self._seen: set[str] | None = None

    def deliver(self, alert: Alert) -> bool:
        """Raises DeliveryError when the journal cannot be read: without it, a repeat
        cannot be ruled out, so nothing is sent."""
        if self._seen is None:
            try:
                self._seen = recent_alert_ids(self.journal)
            except OSError as exc:
                raise DeliveryError(f"cannot read the journal {self.journal}: {exc}") from exc
        if alert.alert_id in self._seen:
            return False
        self._send(alert)
        self._seen.add(alert.alert_id)
        return True

    def _send(self, alert: Alert) -> None:
        raise NotImplementedError


class JsonlSink(_DeliversOnce):
    """Appends each alert as one line of ``path`` (the file is its own journal)."""

    name = "jsonl"

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        super().__init__(path)
        self.path = Path(path)
        self.clock = clock

    def _send(self, alert: Alert) -> None:
        try:
            append_line(self.path, {**alert.to_record(), "deliveredAt": self.clock()})
        except OSError as exc:
            raise DeliveryError(f"cannot append to {self.path}: {exc}") from exc


class WebhookSink(_DeliversOnce):
    """POSTs the Slack-shaped payload; any 2xx answer is a delivery."""

    name = "webhook"

    def __init__(
        self,
        url: str,
        journal: Path,
        *,
        timeout_s: float = WEBHOOK_TIMEOUT_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(journal)
        self.url = url
        self.timeout_s = timeout_s
        self.clock = clock

    def _send(self, alert: Alert) -> None:
        try:
            response = httpx.post(self.url, json=slack_payload(alert), timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            raise DeliveryError(f"webhook {type(exc).__name__}: {exc}") from exc
        if not 200 <= response.status_code < 300:
            raise DeliveryError(
                f"webhook answered HTTP {response.status_code}: {response.text[:200]}"
            )
        try:
            append_line(
                self.journal,
                {"alertId": alert.alert_id, "eventId": alert.event_id, "deliveredAt": self.clock()},
            )
        except OSError:
            pass  # delivered; the cursor still advances, only the restart guard is weaker


def sink_from_settings(settings: Settings) -> AlertSink:
    """The webhook when NEO_ALERT_WEBHOOK_URL is set, else ``$NEO_HOME/alerts.jsonl``."""
    url = (settings.alerts.alert_webhook_url or "").strip()
    if url:
        return WebhookSink(url, settings.store.home_dir / WEBHOOK_JOURNAL_FILE)
    return JsonlSink(settings.store.home_dir / ALERTS_FILE)
