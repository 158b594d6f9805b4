"""The self-evaluation in Dagster: ``retrieval_quality`` per repo, measured in the sweep's
own step (the model is not loaded twice), recall and MRR plotted as metadata; two WARN
checks: a drop past the margin, and a switch the gate refuses or still waits on."""

import time
import warnings
from typing import Any

import anyio
import dagster as dg

from neo_assets.config.settings import Settings
from neo_assets.core.ids.partition_keys import parse_partition_key
from neo_assets.defs.partitions import tenant_repos
from neo_assets.defs.resources import LedgerResource, SettingsResource, TenantsResource
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.generations.serving import configured_generation, serving_generation
from neo_assets.quality.gate import QualityScore
from neo_assets.quality.measure import Measured, evaluate_due
from neo_assets.quality.parser_switch import switch_verdicts
from neo_assets.quality.records import score_history
from neo_assets.quality.rules import FIGURES, Metrics, dropped
from neo_assets.query.search import QueryService
from neo_assets.query.serving import Resident
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger

ASSET = "retrieval_quality"
OUT = dg.AssetOut(
    group_name="quality",
    kinds={"python"},
    owners=["team:knowledge-platform"],
    description=(
        "How well the repo's knowledge base answers questions drawn from its own history "
        "(commit subject -> the one function the commit changed): recall@1/5/10 and MRR@10 "
        "at the serving embedding generation, and at a new one the quality gate waits on. "
        "Measured after a sweep that moved the revision; the figures plot over time."
    ),
    is_required=False,
    dagster_type=dg.Nothing,
)


def _figures(score: QualityScore, prefix: str = "") -> dict[str, Any]:
    figures = {f"{prefix}{name}": dg.MetadataValue.float(getattr(score, name)) for name in FIGURES}
    figures[f"{prefix}questions"] = dg.MetadataValue.int(score.questions)
    return figures | {f"{prefix}generation": score.generation}


def quality_metadata(measured: list[Measured], serving: str | None) -> dict[str, Any]:
    md: dict[str, Any] = {}
    for m in measured:
        if m.score is None:
            md[f"problem_{m.due.generation}"] = m.problem or "not evaluated"
            continue
        prefix = "" if m.due.generation == serving else "candidate_"
        md |= _figures(m.score, prefix)
        md["revision"] = m.score.revision
    md["evaluation_seconds"] = dg.MetadataValue.float(round(sum(m.seconds for m in measured), 2))
    md["evaluations"] = [f"{m.due.generation} ({m.due.reason})" for m in measured]
    return md


def quality_after_sweep(
    log: Any,
    tenant_id: str,
    repo_slug: str,
    settings: Settings,
    store: ChromaStore,
    ledger: Ledger,
    provider: EmbeddingProvider,
) -> dg.MaterializeResult | None:
    """The repo's due self-evaluations, run and recorded (None: none was due, or
    NEO_QUALITY_AFTER_SWEEP is off). Never fails the sweep: a problem is metadata."""
    if not settings.quality.after_sweep:
        return None
    resident = Resident(settings, store, ledger)
    # The sweep's provider answers at the configured generation: no second model load.
    resident._providers[configured_generation(settings)] = provider  # noqa: SLF001
    service = QueryService(resident)
    started = time.perf_counter()
    try:
        measured = anyio.run(evaluate_due, service, tenant_id, repo_slug)
    except Exception as exc:  # noqa: BLE001 - the sweep's verdict stands whatever this does
        log.warning(f"{tenant_id}/{repo_slug}: self-evaluation not made: {exc}")
        return None
    if not measured:
        return None
    tenant = resident.tenants().tenant(tenant_id)
    slugs = [r.slug for r in tenant.repos] if tenant else [repo_slug]
    serving = serving_generation(settings, ledger, tenant_id, slugs).generation
    log.info(
        f"{tenant_id}/{repo_slug}: self-evaluation "
        + ", ".join(
            f"{m.due.generation}: " + (m.figures() or f"not made ({m.problem})") for m in measured
        )
        + f" in {time.perf_counter() - started:.1f}s"
    )
    return dg.MaterializeResult(asset_key=ASSET, metadata=quality_metadata(measured, serving))


def _metrics(score: QualityScore) -> Metrics:
    return Metrics(score.questions, *(getattr(score, name) for name in FIGURES))


# Partitioned checks are a preview feature in Dagster 1.13 (see reconcile/defs.py).
with warnings.catch_warnings():
    warnings.simplefilter("ignore", dg.PreviewWarning)

    @dg.asset_check(
        asset=dg.AssetKey(ASSET),
        partitions_def=tenant_repos,
        description=(
            "Quality drop: the repo's latest self-evaluation at the serving generation is "
            "not worse than the one before by more than NEO_QUALITY_MARGIN (recall@1/5/10, "
            "MRR@10). WARN naming the figures that fell."
        ),
    )
    def retrieval_quality_drop(
        context: dg.AssetCheckExecutionContext,
        settings: SettingsResource,
        tenants: TenantsResource,
        ledger: LedgerResource,
    ) -> dg.AssetCheckResult:
        tenant_id, repo_slug = parse_partition_key(context.partition_key)
        cfg = settings.load()
        tenant = tenants.load(ledger.get()).tenant(tenant_id)
        slugs = [r.slug for r in tenant.repos] if tenant else [repo_slug]
        serving = serving_generation(cfg, ledger.get(), tenant_id, slugs).generation
        history = score_history(ledger.get(), tenant_id, repo_slug, serving or "", limit=2)
        if len(history) < 2:
            return dg.AssetCheckResult(
                passed=True, metadata={"summary": "fewer than two evaluations to compare"}
            )
        current, previous = history
        fell = dropped(_metrics(previous), _metrics(current), cfg.quality.margin)
        summary = (
            "no figure fell by more than the margin"
            if not fell
            else f"{tenant_id}/{repo_slug} answers worse at {serving}: "
            + ", ".join(
                f"{name} {getattr(previous, name):.3f} -> {getattr(current, name):.3f}"
                for name in fell
            )
            + f" (margin {cfg.quality.margin:.2f}; revision {current.revision[:12]})"
        )
        return dg.AssetCheckResult(
            passed=not fell,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"summary": dg.MetadataValue.md(summary), "fell": list(fell)},
        )

    @dg.asset_check(
        asset=dg.AssetKey(ASSET),
        partitions_def=tenant_repos,
        description=(
            "Quality gate: the tenant's configured embedding generation (and the repo's "
            "declared parser version) serves, or is held by the gate (refused: worse than "
            "the serving one past NEO_QUALITY_MARGIN on a repo's self-evaluation; pending: "
            "not yet evaluated on both sides). WARN with the figures and the command that "
            "lets it serve anyway."
        ),
    )
    def quality_gate(
        context: dg.AssetCheckExecutionContext,
        settings: SettingsResource,
        tenants: TenantsResource,
        ledger: LedgerResource,
    ) -> dg.AssetCheckResult:
        tenant_id, repo_slug = parse_partition_key(context.partition_key)
        tenant = tenants.load(ledger.get()).tenant(tenant_id)
        repos = tenant.repos if tenant else ()
        cfg = settings.load()
        choice = serving_generation(cfg, ledger.get(), tenant_id, [r.slug for r in repos])
        parser = switch_verdicts(
            cfg,
            ledger.get(),
            tenant_id,
            {r.slug: (r.parser.id, r.parser.version) for r in repos if r.slug == repo_slug},
            choice.generation,
        ).get(repo_slug)
        held = [v for v in (choice.gate, parser) if v is not None and not v.allowed]
        verdict = held[0] if held else (choice.gate or parser)
        if verdict is None:
            return dg.AssetCheckResult(
                passed=True, metadata={"summary": "no switch waits on the gate"}
            )
        return dg.AssetCheckResult(
            passed=not held,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "summary": dg.MetadataValue.md(" ".join(v.reason for v in held) or verdict.reason),
                "state": verdict.state,
                "candidate": verdict.candidate,
                "serving": verdict.serving,
                "worse": list(verdict.worse),
                "waiting": list(verdict.waiting),
            },
        )


defs = dg.Definitions(asset_checks=[retrieval_quality_drop, quality_gate])
