"""``GET /readyz``: whether the service can answer truly now. The store (Chroma answers,
and holds rows of every declared repo the ledger records as swept complete), the ledger
(a query succeeds) and each serving generation's provider (embeds a short text within
``READY_EMBED_TIMEOUT_S``) are each checked; any failure names what and the fix.
``GET /healthz`` stays liveness: 200 while the process answers."""

from typing import Any

import anyio
import sqlalchemy as sa

from neo_assets.core import codes
from neo_assets.embedding.cancel import CancelScope
from neo_assets.query.serving import serving_targets
from neo_assets.serve.runtime import Runtime

READY_EMBED_TIMEOUT_S = 5.0


def _failed(code: str, message: str) -> dict[str, Any]:
    return {"ok": False, "code": code, "message": message}


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:200]}" if str(exc) else type(exc).__name__


def check_ledger(runtime: Runtime) -> dict[str, Any]:
    try:
        with runtime.resident.ledger.engine.connect() as conn:
            conn.execute(sa.text("SELECT 1")).scalar()
    except Exception as exc:  # any failure is "not ready", never a traceback
        return _failed(
            codes.READY_LEDGER_UNREACHABLE,
            f"the ledger does not answer a query ({_why(exc)}): start its database or fix "
            "NEO_LEDGER_URL (default: NEO_HOME's ledger.sqlite)",
        )
    return {"ok": True}


def check_store(runtime: Runtime, ledger_ok: bool) -> dict[str, Any]:
    service = runtime.service
    try:
        runtime.resident.store.client.heartbeat()
    except Exception as exc:
        return _failed(
            codes.READY_STORE_UNREACHABLE,
            f"the store ({service.store_label()}) does not answer ({_why(exc)}): start the "
            "Chroma server or fix NEO_CHROMA_URL / NEO_HOME",
        )
    if not ledger_ok:  # what the store must hold is the ledger's to say
        return {"ok": True, "holdings": "unchecked: the ledger does not answer"}
    missing: list[str] = []
    for tenant in runtime.resident.tenants().tenants:
        try:
            view = service.view(tenant.id)
            gone = service.missing_from_store(tenant.id, view, [r.slug for r in tenant.repos])
        except Exception as exc:
            return _failed(
                codes.READY_STORE_UNREACHABLE,
                f"the store ({service.store_label()}) could not be read for tenant "
                f"{tenant.id} ({_why(exc)}): check the Chroma data (NEO_CHROMA_URL / NEO_HOME)",
            )
        if gone:
            missing.append(service.store_missing(tenant.id, gone).message)
    if missing:
        return _failed(codes.QUERY_STORE_MISSING, " | ".join(missing))
    return {"ok": True}


async def check_provider(runtime: Runtime) -> dict[str, Any]:
    resident = runtime.resident
    seen: set[str] = set()
    for tenant in resident.tenants().tenants:
        try:
            target = (await anyio.to_thread.run_sync(serving_targets, resident, tenant.id)).first
        except Exception as exc:
            return _failed(
                codes.READY_PROVIDER_UNAVAILABLE,
                f"tenant {tenant.id}'s serving generation cannot be read ({_why(exc)})",
            )
        if target.embedding_generation in seen:
            continue
        seen.add(target.embedding_generation)
        try:
            provider = resident.provider_for(target)
            with anyio.fail_after(READY_EMBED_TIMEOUT_S):
                await provider.embed(["ready"], CancelScope(label="ready"), "query")
        except TimeoutError:
            return _failed(
                codes.READY_PROVIDER_UNAVAILABLE,
                f"the provider of embedding generation {target.embedding_generation} did not "
                f"embed a short text within {READY_EMBED_TIMEOUT_S:g} s: check that its server "
                "runs and answers (NEO_EMBEDDING_*)",
            )
        except Exception as exc:
            return _failed(
                codes.READY_PROVIDER_UNAVAILABLE,
                f"the provider of embedding generation {target.embedding_generation} cannot "
                f"embed ({_why(exc)}): fix the provider (NEO_EMBEDDING_*) and its server",
            )
    return {"ok": True}


async def readiness(runtime: Runtime) -> tuple[bool, dict[str, Any]]:
    """(ready, the body /readyz answers with)."""
    ledger = await anyio.to_thread.run_sync(check_ledger, runtime)
    store = await anyio.to_thread.run_sync(check_store, runtime, ledger["ok"])
    provider = await check_provider(runtime)
    checks = {"store": store, "ledger": ledger, "provider": provider}
    ready = all(c["ok"] for c in checks.values())
    failed = [name for name, c in checks.items() if not c["ok"]]
    return ready, {"status": "ready" if ready else "not ready", "failed": failed, "checks": checks}
