"""Deliver pending alerts in event order, with bounded retries, within one tick's budget.
Stops at the first alert that cannot be delivered, so the cursor never skips one."""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from neo_assets.alerts.rules import Alert, Pending, retry_delays, retry_wait
from neo_assets.alerts.sinks import AlertSink, DeliveryError

# Four attempts per alert per tick (waits 0.5 s, 1 s, 2 s), and a tick never spends more
# than TICK_BUDGET_S delivering: the sensor's evaluation must end well inside Dagster's
# sensor timeout, and a dead sink must not hold the tick for long.
RETRY_DELAYS_S = retry_delays(3, 0.5, 2.0, 4.0)
TICK_BUDGET_S = 30.0


@dataclass
class TickReport:
    handled: list[Pending] = field(default_factory=list)
    delivered: list[str] = field(default_factory=list)
    repeats: list[str] = field(default_factory=list)  # delivered before (sink journal)
    failed: Alert | None = None
    error: str | None = None
    attempts: int = 0
    out_of_time: bool = False


def deliver_in_order(
    pending: Sequence[Pending],
    sink: AlertSink,
    *,
    delays: Sequence[float] = RETRY_DELAYS_S,
    budget_s: float = TICK_BUDGET_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> TickReport:
    started = clock()
    report = TickReport()
    for event in pending:
        if event.alert is None:
            report.handled.append(event)
            continue
        if clock() - started >= budget_s:
            report.out_of_time = True
            break
        failures = 0
        while True:
            report.attempts += 1
            try:
                fresh = sink.deliver(event.alert)
            except DeliveryError as exc:
                failures += 1
                wait = retry_wait(delays, failures, clock() - started, budget_s)
                if wait is None:
                    report.failed = event.alert
                    report.error = f"{exc} (after {failures} attempt(s))"
                    return report
                sleep(wait)
                continue
            (report.delivered if fresh else report.repeats).append(event.alert.alert_id)
            report.handled.append(event)
            break
    return report
