"""The operator's per-repo snapshot (CLI ``status``, the ``kb_status`` asset)."""

import time
from dataclasses import asdict
from typing import Any

from neo_assets.config.settings import Settings
from neo_assets.core.codes import DISPOSITION_SECRET, OUTCOME_FAILED
from neo_assets.core.codes import KB_VECTOR_EMBED_PROVIDER_UNREACHABLE as PROVIDER_UNREACHABLE
from neo_assets.core.ids.partition_keys import partition_key
from neo_assets.core.ids.stamps import tenant_filter
from neo_assets.declaration.in_force import (
    declaration_doc,
    mark_misdeclared,
    remembered_repo_row,
    withheld_repo_rows,
)
from neo_assets.generations.records import generation_records, repo_generations
from neo_assets.generations.rules import GenerationRecord, RepoGeneration
from neo_assets.generations.serving import collection_of, serving_generation
from neo_assets.health import records as health_store
from neo_assets.quality.gate import GateVerdict
from neo_assets.quality.parser_switch import switch_verdicts
from neo_assets.reconcile.retirement import read_retired
from neo_assets.secrets.rules import secret_locations
from neo_assets.status.rules import STATE_RETIRED, behind_line, repo_state_line
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger
from neo_assets.sweep.due import DueRepo, declared_repos, evaluate
from neo_assets.sweep.rules.censuses import decode_census
from neo_assets.sweep.rules.summary import read_stored_summary
from neo_assets.tenants.validation import TenantsFile


def retired_repo_rows(
    tenants: TenantsFile, ledger: Ledger, store: ChromaStore
) -> list[dict[str, Any]]:
    """One row per retired repo (a retired tenant's repos included) the ledger remembers:
    outcome ``retired`` and the rows that still wait for reclamation."""
    found = read_retired(ledger, tenants)
    out = []
    for state in ledger.all_repo_states():
        tid, slug = state["tenant_id"], state["repo_slug"]
        if found.kind(tid, slug) is None:
            continue
        out.append(
            remembered_repo_row(tid, slug, state, store, outcome=STATE_RETIRED, cause=None)
            | {"retired": True}
        )
    return sorted(out, key=lambda r: (r["tenantId"], r["repoSlug"]))


def generation_rows(
    at: list[RepoGeneration],
    records: dict[str, GenerationRecord],
    *,
    serving: str | None,
    configured: str,
    settings: Settings,
) -> list[dict[str, Any]]:
    """The repo's generations as the snapshot shows them (the configured one even before
    its first sweep), serving first."""
    by_gen = {g.generation: g for g in at}
    names = [serving] if serving else []
    names += sorted(g for g in {*by_gen, configured} if g != serving)
    out = []
    for name in names:
        g = by_gen.get(name)
        out.append(
            {
                "generation": name,
                "state": ("complete" if g.complete else "building") if g else "building",
                "chunks": g.chunks if g else None,
                "present": g.present if g else None,
                "serving": name == serving,
                "configured": name == configured,
                "collection": collection_of(settings, records, name),
            }
        )
    return out


def gate_doc(verdict: GateVerdict | None) -> dict[str, Any] | None:
    if verdict is None:
        return None
    return {**asdict(verdict), "worse": list(verdict.worse), "waiting": list(verdict.waiting)}


def secret_census(
    row: dict[str, Any], fence_records: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The repo's ``secret`` census as its last sweep recorded it, with where each secret
    is (path, line, rule: from the fences' receipts, never the secret); None when never
    observed (a sweep before this release)."""
    census = decode_census(row.get("secret_census"))
    if census is None:
        return None
    # The census's own ids: a fence of a chunk the repo no longer declares is not shown.
    ids = set(census["ids"])
    receipts = [
        (str(f["chunk_id"]), f.get("receipt"))
        for f in fence_records
        if f.get("disposition") == DISPOSITION_SECRET and f["chunk_id"] in ids
    ]
    return {**census, "locations": secret_locations(receipts)}


def build_status(
    settings: Settings, tenants: TenantsFile, ledger: Ledger, store: ChromaStore
) -> dict[str, Any]:
    repos = []
    records = generation_records(ledger)
    # Due and behind by the sweep sensor's own rule (sweep.due.evaluate).
    dues = {d.key: d for d in evaluate(declared_repos(tenants), settings, ledger, time.time())}
    for tenant in tenants.tenants:
        choice = serving_generation(settings, ledger, tenant.id, [r.slug for r in tenant.repos])
        parser_gates = switch_verdicts(
            settings,
            ledger,
            tenant.id,
            {r.slug: (r.parser.id, r.parser.version) for r in tenant.repos},
            choice.generation,
        )
        at = repo_generations(ledger, tenant.id)
        for repo in tenant.repos:
            found = dues.get(partition_key(tenant.id, repo.slug))
            entry = declared_repo_row(
                settings,
                ledger,
                store,
                tenant.id,
                repo,
                choice,
                [g for g in at if g.repo_slug == repo.slug],
                records,
                found,
            )
            # The quality gate's verdict on the declared parser replacing the serving one.
            entry["parserGate"] = gate_doc(parser_gates.get(repo.slug))
            repos.append(entry | due_fields(found, entry["lastIngestedRev"]))
    repos += retired_repo_rows(tenants, ledger, store)
    # What the tenants file gets wrong: withheld repos, "misdeclared" per repo.
    repos += withheld_repo_rows(tenants, ledger, store)
    mark_misdeclared(repos, tenants)
    for entry in repos:
        entry["state"], entry["stateDetail"] = repo_state_line(entry)
    canary = health_store.latest_canary(ledger)
    freeze = health_store.freeze_record(ledger, settings.store.collection_name)
    return {
        "repos": repos,
        "canary": canary.to_doc() if canary is not None else None,
        "freeze": freeze.to_doc() if freeze is not None else None,
        "generatedAt": time.time(),
        "declaration": declaration_doc(tenants),
    }


def declared_repo_row(
    settings: Settings,
    ledger: Ledger,
    store: ChromaStore,
    tenant_id: str,
    repo: Any,
    choice: Any,
    at: list[Any],
    records: dict[str, Any],
    found: DueRepo | None,
) -> dict[str, Any]:
    """A declared repo's status row (before its due fields): its last sweep as recorded,
    its censuses, strikes, served rows and generations."""
    row = ledger.repo_state(tenant_id, repo.slug) or {}  # never swept: every field None
    generation = row.get("embedding_generation")
    fence_records = ledger.fences(tenant_id, repo.slug, generation) if generation else []
    strikes = strike_rows(ledger, tenant_id, repo.slug, generation, fence_records, settings)
    serving = choice.generation
    gens = generation_rows(
        at, records, serving=serving, configured=choice.configured, settings=settings
    )
    building = next((g for g in gens if g["configured"] and not g["serving"]), None)
    serving_store = store.sibling(collection_of(settings, records, serving)) if serving else store
    rows = serving_store.count_where(tenant_filter(tenant_id, repo.slug))
    return {
        "tenantId": tenant_id,
        "repoSlug": repo.slug,
        "outcome": row.get("last_outcome"),
        "lastIngestedRev": row.get("last_ingested_rev"),
        "consecutiveFailures": row.get("consecutive_failures"),
        "deferredCauseCode": row.get("deferred_cause_code"),
        "nextDueAt": found.retry_at if found else None,
        "lastAttemptAt": row.get("last_attempt_at"),
        "embeddingGeneration": generation,
        "contentPoisonChunks": decode_census(row.get("content_poison_census")),
        "undeliverableChunks": decode_census(row.get("undeliverable_census")),
        "secretChunks": secret_census(row, fence_records),
        "strikes": strikes,
        "rows": rows,
        "error": read_stored_summary(row.get("last_summary")).first_error_line()
        if row.get("last_outcome") == OUTCOME_FAILED
        or row.get("deferred_cause_code") == PROVIDER_UNREACHABLE
        else None,
        "retired": False,
        # Generations side by side: which one answers this tenant's queries,
        # which one sweeps are building (None: the serving one is configured),
        # and every generation recorded for the repo with its progress.
        "servingGeneration": serving,
        "buildingGeneration": building["generation"] if building else None,
        "buildingProgress": {key: building[key] for key in ("state", "chunks", "present")}
        if building
        else None,
        "generations": gens,
        # The quality gate's verdict on the configured generation taking over.
        "qualityGate": gate_doc(choice.gate),
    }


def strike_rows(
    ledger: Ledger,
    tenant_id: str,
    repo_slug: str,
    generation: str | None,
    fence_records: list[dict[str, Any]],
    settings: Settings,
) -> list[dict[str, Any]]:
    """The repo's chunks on their way to a fence: strikes so far against the threshold."""
    if not generation:
        return []
    threshold = settings.embedding.strike_threshold
    fenced = {f["chunk_id"] for f in fence_records}
    return [
        {
            "chunkId": s["chunk_id"],
            "kind": s["kind"],
            "strikes": s["count"],
            "threshold": threshold,
        }
        for s in ledger.strikes(tenant_id, repo_slug, generation)
        # a chunk that graduated is a fence now, no longer strike progress
        if s["chunk_id"] not in fenced
    ]


def due_fields(found: DueRepo | None, last_ingested_rev: str | None) -> dict[str, Any]:
    """Whether the repo is due and how far behind its head it is (sweep.due's verdict)."""
    behind, behind_reason = behind_line(
        found.reason if found else None,
        last_ingested_rev,
        found.revision if found else None,
    )
    return {
        "due": bool(found and found.reason),
        "dueReason": found.reason if found else None,
        "headRevision": found.revision if found else None,
        "behind": behind,
        "behindReason": behind_reason,
    }
