"""The CLI's one way into Dagster: sweeps, links and reconciliations run as jobs of the
persistent instance (under NEO_HOME, or DAGSTER_HOME), so every run shows in the UI."""

import contextlib
import datetime
import os
import shutil
import time
from pathlib import Path
from typing import Any

import dagster as dg
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from neo_assets.config.settings import Settings
from neo_assets.core import codes
from neo_assets.defs.partition_sync import sync_partitions
from neo_assets.reconcile.retirement import apply_retirement, retired_tenant_ids
from neo_assets.services.handles import open_ledger, store_kept_open
from neo_assets.store.ledger import Ledger
from neo_assets.sweep.defs import EMBEDDING_POOL, SWEEP_STEP
from neo_assets.sweep.due import declared_repos, evaluate
from neo_assets.sweep.progress import listening
from neo_assets.tenants.validation import TenantsFile

PROJECT_DAGSTER_YAML = Path(__file__).resolve().parents[2] / "dagster.yaml"

# The run's full event log goes to the instance (the UI shows it); the terminal gets
# warnings only, next to the progress bar.
QUIET_CONSOLE = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def dagster_instance(settings: Any) -> dg.DagsterInstance:
    """The persistent Dagster instance under NEO_HOME (or DAGSTER_HOME), so CLI runs show
    in the UI. A dagster.yaml with telemetry off is placed there on first use."""
    home = Path(os.environ.get("DAGSTER_HOME") or settings.store.dagster_home).resolve()
    home.mkdir(parents=True, exist_ok=True)
    target = home / "dagster.yaml"
    if not target.exists() and PROJECT_DAGSTER_YAML.exists():
        shutil.copyfile(PROJECT_DAGSTER_YAML, target)
    os.environ["DAGSTER_HOME"] = str(home)
    return dg.DagsterInstance.get()


def _failure_code(result: Any, recorded: dict[str, Any] | None, started_at: float) -> str:
    """The failed sweep's code: the one its stage recorded in the ledger during this run
    (``failure_recorded``), else one of ours named in the error, else STORE_FAILED (the
    ledger itself could not take the record)."""
    if (
        recorded is not None
        and recorded.get("last_outcome") == codes.OUTCOME_FAILED
        and float(recorded.get("updated_at") or 0.0) >= started_at
        and recorded.get("deferred_cause_code")
    ):
        return str(recorded["deferred_cause_code"])
    for event in result.all_events:
        if event.is_step_failure:
            info = event.step_failure_data.error
            text = (
                (info.message if info else "")
                + " "
                + (info.cause.message if info and info.cause else "")
            )
            for code in (
                codes.SOURCE_REPO_MISSING,
                codes.SOURCE_UNREADABLE,
                codes.PARSE_FAILED,
                codes.STORE_FAILED,
            ):
                if code in text:
                    return code
            break
    return codes.STORE_FAILED


def _census_output(result: Any) -> dict[str, Any] | None:
    """fence_census's output when that step succeeded, whatever happened after it."""
    try:
        return result.output_for_node(SWEEP_STEP, "fence_census")
    except Exception:  # noqa: BLE001 - the step did not run or did not succeed
        return None


def _recorded_state(ledger: Any, due: Any) -> dict[str, Any] | None:
    try:
        return ledger.repo_state(due.ctx.tenant_id, due.ctx.repo_slug)
    except Exception:  # noqa: BLE001 - an unreadable ledger is what failed: say STORE_FAILED
        return None


def _failure_message(result: Any) -> str:
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data.error:
            info = event.step_failure_data.error
            # Dagster wraps the step's own error ("Error occurred while executing op"):
            # the user needs the wrapped one, which names the repo and the fix.
            if info.cls_name == "DagsterExecutionStepExecutionError" and info.cause:
                info = info.cause
            first = (info.message.strip().splitlines() or [""])[0]
            # Dagster prefixes the exception's qualified class: the user needs its words.
            head, sep, rest = first.partition(": ")
            if sep and head.rsplit(".", 1)[-1] == info.cls_name:
                first = rest
            return first[:500]
    return ""


def run_sweeps(
    settings: Settings,
    tenants: TenantsFile,
    instance: Any,
    *,
    tenant: str | None = None,
    repo: str | None = None,
    force: bool = False,
    console: Console | None = None,
) -> list[dict[str, Any]]:
    """Sweep every due (or, with force, every) selected repo, one Dagster run each."""

    with open_ledger(settings) as ledger, contextlib.ExitStack() as held:
        sync_partitions(instance, tenants, retired_tenant_ids(ledger, tenants))
        apply_retirement(ledger, tenants, time.time())
        return _sweep_each(settings, tenants, instance, ledger, held, tenant, repo, force, console)


def _sweep_each(
    settings: Settings,
    tenants: TenantsFile,
    instance: Any,
    ledger: Ledger,
    held: contextlib.ExitStack,
    tenant: str | None,
    repo: str | None,
    force: bool,
    console: Console | None,
) -> list[dict[str, Any]]:
    from neo_assets.definitions import defs

    dues = evaluate(
        declared_repos(tenants, tenant, repo), settings, ledger, time.time(), force=force
    )
    if any(d.reason for d in dues):  # runs to come: their sweeps, links and status runs
        held.enter_context(store_kept_open(settings))
    job = defs.resolve_job_def("sweep")
    if dues:
        ensure_pool(instance)
    results: list[dict[str, Any]] = []
    progress = _progress(console)
    task = progress.add_task("sweeping", total=len(dues))
    # Inside a repo: the embedding step's batches (reported in process, see sweep.progress).
    batches = progress.add_task("  embedding", total=None, visible=False)

    def on_batches(key: str, done: int, total: int, embedded: int) -> None:
        progress.update(
            batches,
            description=f"  {key}: {embedded} chunks embedded, batches",
            completed=done,
            total=total,
            visible=True,
        )

    with progress, listening(on_batches):
        for due in dues:
            progress.update(task, description=f"sweeping {due.key}")
            progress.update(batches, visible=False)
            results.append(_sweep_one(due, job, instance, ledger))
            progress.advance(task)
    # Launched and not skipped (a not-due failure launched nothing; a lease skip wrote nothing).
    swept = [
        d.ctx
        for d, r in zip(dues, results, strict=True)
        if "runId" in r and r["outcome"] != codes.OUTCOME_SKIPPED
    ]
    if swept:
        refresh_links(settings, swept, instance, console=console)
        _refresh_status(instance)
    return results


def _refresh_status(instance: Any) -> None:
    """The status snapshot the UI shows, after the runs that change it."""
    from neo_assets.definitions import defs

    defs.resolve_job_def("status").execute_in_process(
        instance=instance, run_config=QUIET_CONSOLE, raise_on_error=False
    )


def _progress(console: Console | None, counted: str = "") -> Progress:
    """Progress bars (``counted``: what the count counts), on stderr unless a console is given."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}" + counted),
        TimeElapsedColumn(),
        console=console or Console(stderr=True, soft_wrap=True),
        transient=False,
    )


def _sweep_one(due: Any, job: Any, instance: Any, ledger: Ledger) -> dict[str, Any]:
    """One repo's entry: its sweep run's census, or why no run was launched or why it failed."""
    if due.reason is None and due.last_failure is not None:
        # Not due, but not fine either: its last sweep failed and is backing off.
        return not_due_failure(due)
    if due.reason is None:
        return {
            "tenantId": due.ctx.tenant_id,
            "repoSlug": due.ctx.repo_slug,
            "outcome": codes.OUTCOME_SKIPPED,
            "revision": due.revision,
            "counts": {},
            "deferredCauseCode": None,
        }
    started_at = time.time()
    result = job.execute_in_process(
        instance=instance,
        run_config=QUIET_CONSOLE,
        partition_key=due.key,
        raise_on_error=False,
        tags={
            "neo/due-reason": due.reason,
            "neo/tenant": due.ctx.tenant_id,
            "neo/launched-by": "cli",
        },
    )
    census = _census_output(result)
    if census is not None:
        # The verdict was recorded: whatever the run did after it does not turn a
        # complete or deferred sweep into a failed one.
        entry = {**census, "runId": result.run_id, "dueReason": due.reason}
        if not result.success:
            entry["warning"] = _failure_message(result)
        return entry
    return {
        "tenantId": due.ctx.tenant_id,
        "repoSlug": due.ctx.repo_slug,
        "outcome": codes.OUTCOME_FAILED,
        "revision": due.revision,
        "counts": {},
        "deferredCauseCode": _failure_code(result, _recorded_state(ledger, due), started_at),
        "error": _failure_message(result),
        "runId": result.run_id,
        "dueReason": due.reason,
    }


def utc_text(epoch: float) -> str:
    """An epoch time as ISO 8601 UTC to the second: ``2026-01-02T03:04:05Z``."""
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def not_due_failure(due: Any) -> dict[str, Any]:
    """The entry of a repo whose last sweep failed and is not due yet (no run launched):
    outcome ``failed``, its recorded cause and error, and when it will be retried."""
    failure = due.last_failure
    error = failure.error
    if error and failure.cause and error.startswith(f"{failure.cause}: "):
        error = error[len(failure.cause) + 2 :]  # the cause is shown beside it already
    return {
        "tenantId": due.ctx.tenant_id,
        "repoSlug": due.ctx.repo_slug,
        "outcome": codes.OUTCOME_FAILED,
        "revision": due.revision,
        "counts": {},
        "deferredCauseCode": failure.cause,
        "error": error,
        "nextDueAt": failure.retry_at,
        "retryAfter": None if failure.retry_at is None else utc_text(failure.retry_at),
    }


def ensure_pool(instance: Any, attempts: int = 5) -> None:
    """Create the embedding pool's limit row before the first sweep step: Dagster's own insert
    races when processes start at once (on Postgres the loser's run fails); here the loser
    just looks again."""
    storage = getattr(instance, "event_log_storage", None)
    if storage is None or not hasattr(storage, "initialize_concurrency_limit_to_default"):
        return
    for attempt in range(attempts):
        try:
            if EMBEDDING_POOL in storage.get_concurrency_keys():
                return
            storage.initialize_concurrency_limit_to_default(EMBEDDING_POOL)
            return
        except Exception:  # noqa: BLE001 - the race's loser; the step would surface a real fault
            time.sleep(0.1 * (attempt + 1))


def refresh_links(
    settings: Settings,
    ctxs: list[Any],
    instance: Any,
    *,
    console: Console | None = None,
) -> list[dict[str, Any]]:
    """Run the links job for each of ``ctxs`` whose links are due (what ``links_sensor``
    does in the UI), one run each; a failed links run is reported, never a failed sweep."""
    from neo_assets.definitions import defs
    from neo_assets.links.due import evaluate_links

    job = defs.resolve_job_def("links")
    out: list[dict[str, Any]] = []
    with open_ledger(settings) as ledger:
        dues = [d for d in evaluate_links(ctxs, settings, ledger) if d.reason is not None]
    if not dues:
        return out
    bar = _progress(console, " rows")
    # The links run's stages (rows read, temporal pass, each semantic block, storing),
    # reported in process like the embedding batches.
    task = bar.add_task("links", total=None, visible=False)

    def on_links(stage: str, done: int, total: int, _rows: int) -> None:
        bar.update(task, description=stage, completed=done, total=total, visible=True)

    with bar, listening(on_links):
        for due in dues:
            out.append(_links_one(job, instance, due, console))
    return out


def _links_one(job: Any, instance: Any, due: Any, console: Console | None) -> dict[str, Any]:
    """One links run of ``due`` (a failed one is reported, never a failed sweep)."""
    result = job.execute_in_process(
        instance=instance,
        run_config=QUIET_CONSOLE,
        partition_key=due.key,
        raise_on_error=False,
        tags={"neo/links-reason": due.reason, "neo/launched-by": "cli"},
    )
    if not result.success:
        (console or Console(stderr=True, soft_wrap=True)).print(
            f"[yellow]links of {due.key} not refreshed: {_failure_message(result)}[/]"
        )
    return {"key": due.key, "runId": result.run_id, "success": result.success}


# ------------------------------------------------------------------------ reconcile
RECONCILE_ASSET = "kb_reconciliation"


def _checks(result: Any) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for ev in result.get_asset_check_evaluations():
        md = {key: getattr(value, "value", value) for key, value in ev.metadata.items()}
        md.pop("summary", None)
        out[ev.check_name] = {
            "passed": bool(ev.passed),
            "severity": ev.severity.value,
            "metadata": md,
        }
    return out


def _innermost_failure(result: Any) -> str:
    """The first failed step's error, by its innermost cause (what actually went wrong)."""
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data.error:
            error = event.step_failure_data.error
            while error.cause is not None:
                error = error.cause
            lines = error.message.strip().splitlines() or [""]
            return f"{event.step_key}: {lines[0]}"[:500]
    return ""


def run_reconciliation(
    settings: Settings,
    tenants: TenantsFile,
    instance: Any,
    *,
    tenant: str | None = None,
    apply: bool = False,
) -> list[dict[str, Any]]:
    """One ``reconcile`` run per selected tenant, declared or retired (a retired tenant's
    rows are reclaimed by its own run). Without ``apply`` the run is classify-only (no
    write of any kind); with it, the run re-stamps and, as the setting alone decides,
    reclaims. Returns one report per tenant, with its checks' verdicts."""
    from neo_assets.definitions import defs
    from neo_assets.reconcile.defs import RECONCILE_JOB

    with open_ledger(settings) as ledger:
        retired = retired_tenant_ids(ledger, tenants)
    known = [t.id for t in tenants.tenants] + retired
    tenant_ids = [t for t in known if tenant is None or t == tenant]
    sync_partitions(instance, tenants, retired)
    job = defs.resolve_job_def(RECONCILE_JOB)
    with store_kept_open(settings) if tenant_ids else contextlib.nullcontext():
        reports = [_reconcile_one(settings, instance, job, t, apply) for t in tenant_ids]
        if tenant_ids:  # the snapshot the UI shows follows every reconciliation
            _refresh_status(instance)
        return reports


def _reconcile_one(
    settings: Settings, instance: Any, job: Any, tenant_id: str, apply: bool
) -> dict[str, Any]:
    result = job.execute_in_process(
        instance=instance,
        partition_key=tenant_id,
        run_config={
            **QUIET_CONSOLE,
            "ops": {RECONCILE_ASSET: {"config": {"classify_only": not apply}}},
        },
        raise_on_error=False,
        tags={"neo/tenant": tenant_id, "neo/launched-by": "cli"},
    )
    try:
        report = dict(result.output_for_node(RECONCILE_ASSET))
    except Exception:  # the asset step failed: report the run, not a plan
        report = {
            "tenantId": tenant_id,
            "enabled": settings.reconcile.enabled,
            "orphans": {},
            "reclaimed": 0,
            "skippedUnstamped": 0,
            "error": _innermost_failure(result),
        }
    report.pop("reclaimedPaths", None)
    report["checks"] = _checks(result)
    report["runId"] = result.run_id
    report["success"] = bool(result.success)
    return report
