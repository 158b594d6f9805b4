"""The declaration in force: the tenants file read without refusing it, each tenant's last
good declaration standing in for what the file gets wrong (declaration/rules.py). Every
reader goes through ``load_declaration``; only one that checked the paths records a good one."""

import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from neo_assets.config.settings import Settings
from neo_assets.core import codes
from neo_assets.core.ids.stamps import tenant_filter
from neo_assets.declaration.records import last_good_declarations, record_good_declaration
from neo_assets.declaration.rules import (
    SOURCE_LAST_GOOD,
    STANDS_LAST_GOOD,
    DeclarationVerdict,
    Misdeclared,
    declaration_verdict,
    in_force,
)
from neo_assets.store.ledger import Ledger
from neo_assets.tenants.validation import (
    ConfigProblem,
    Tenant,
    TenantsConfigError,
    TenantsFile,
    TenantsReading,
    read_tenants,
)

if TYPE_CHECKING:
    from neo_assets.services.handles import OpenOnFirstUse
    from neo_assets.store.chroma_store import ChromaStore


# (ledger URL, tenant id) -> (the tenants file's stamp, the digest) this process last
# recorded as the tenant's last good declaration: the same file read again (every sensor
# tick, every run) opens no ledger (the cost: docs/performance.md). Keyed
# by the file's stamp too, so a file changed and changed back (another process recording
# the version in between) is recorded again.
_RECORDED: dict[tuple[str, str], tuple[Any, str]] = {}


def _stamp(path: Any) -> Any:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def load_declaration(
    settings: Settings,
    ledger: Ledger | None = None,
    *,
    check_paths: bool = True,
    record: bool = True,
    now: float | None = None,
) -> TenantsFile:
    """The declaration in force; raises ``TenantsConfigError`` when no repo is left in force.
    ``record``: remember each good tenant (only with ``check_paths``); ``ledger`` None: one
    is opened only when needed."""
    stamp = _stamp(settings.store.resolved_tenants_file)
    reading = read_tenants(
        settings.store.resolved_tenants_file,
        allowed_roots=settings.store.allowed_roots,
        check_paths=check_paths,
        home=settings.store.home_dir,
    )
    # The ledger given, or one opened on first use and disposed of at the end (the
    # handles import numpy: not at this module's import, which the CLI's config read takes).
    from neo_assets.services.handles import OpenOnFirstUse, open_ledger  # noqa: PLC0415

    if ledger is not None:
        on_demand = OpenOnFirstUse(lambda: ledger, lambda _ledger: None)
    else:
        on_demand = OpenOnFirstUse(lambda: open_ledger(settings), Ledger.dispose)
    try:
        return _in_force(settings, reading, on_demand, check_paths and record, now, stamp)
    finally:
        on_demand.close()


def _in_force(
    settings: Settings,
    reading: TenantsReading,
    ledger: "OpenOnFirstUse",
    record: bool,
    now: float | None,
    stamp: Any = None,
) -> TenantsFile:
    url = settings.store.resolved_ledger_url
    if not reading.problems:
        if record:
            remember(ledger, url, reading.tenants, now, stamp)
        return TenantsFile(path=reading.path, tenants=reading.tenants)
    last_good = last_good_declarations(ledger.get())
    decl = in_force(
        reading.blocks,
        last_good,
        file_problems=reading.file_problems,
        file_readable=reading.readable,
    )
    if not any(plain.get("repos") for plain in decl.tenants):
        # No repo usable and none to stand in: nothing can run; refused, as before.
        raise TenantsConfigError(reading.path, reading.problems)
    tenants = tuple(Tenant.from_plain(plain) for plain in decl.tenants)
    if record:
        remember(ledger, url, [t for t in tenants if t.id in decl.good], now, stamp)
    return TenantsFile(
        path=reading.path,
        tenants=tenants,
        misdeclared=decl.misdeclared,
        withheld=decl.withheld,
        source=decl.source,
        file_problems=tuple(decl.file_problems),
        retires_nothing=decl.retires_nothing,
    )


def remember(
    ledger: "OpenOnFirstUse",
    url: str,
    tenants: Sequence[Tenant],
    now: float | None = None,
    stamp: Any = None,
) -> None:
    """Record each tenant's declaration as its last good one (when it changed; what this
    process recorded from the same file is not written, nor read, again)."""
    when = time.time() if now is None else now
    for tenant in tenants:
        digest = tenant.declaration_digest()
        if stamp is not None and _RECORDED.get((url, tenant.id)) == (stamp, digest):
            continue
        record_good_declaration(ledger.get(), tenant.id, digest, tenant.to_plain(), when)
        _RECORDED[(url, tenant.id)] = (stamp, digest)


def problem_doc(problem: ConfigProblem) -> dict[str, Any]:
    return {"location": problem.location, "line": problem.line, "message": problem.message}


def misdeclared_doc(entry: Misdeclared) -> dict[str, Any]:
    """One misdeclaration as status --json shows it: its first problem's line and
    message (which says what is allowed: the fix), every problem, and what stands in."""
    first = entry.problems[0] if entry.problems else None
    return {
        "tenantId": entry.tenant_id,
        "repoSlug": entry.repo_slug,
        "line": getattr(first, "line", None),
        "message": str(first) if first is not None else None,
        "problems": [problem_doc(p) for p in entry.problems],
        "inForce": entry.stands,
    }


def misdeclared_for(tenants: TenantsFile, tenant_id: str, repo_slug: str) -> Misdeclared | None:
    """The misdeclaration that covers the repo: its own, else its tenant's (a tenant-level
    problem or an entry whose slug cannot be read), else a block that names no tenant
    when the tenant is held from its last good declaration only."""
    own = [m for m in tenants.misdeclared if m.tenant_id == tenant_id]
    return next((m for m in own if m.repo_slug == repo_slug), None) or next(
        (m for m in own if m.repo_slug is None), None
    )


def declaration_doc(tenants: TenantsFile) -> dict[str, Any]:
    """status --json "declaration": where the declaration in force came from and every
    problem of the file (each misdeclaration's and the file's own)."""
    problems = [problem_doc(p) for p in tenants.file_problems]
    for entry in tenants.misdeclared:
        problems += [problem_doc(p) for p in entry.problems]
    return {
        "source": tenants.source,
        "path": str(tenants.path),
        "problems": problems,
        "misdeclared": [misdeclared_doc(m) for m in tenants.misdeclared],
        "withheld": [{"tenantId": tid, "repoSlug": slug} for tid, slug in tenants.withheld],
    }


def warning_lines(tenants: TenantsFile) -> list[str]:
    """What a person is told (CLI stderr, sensor logs) when the declaration in force is
    not exactly the file's: one line per problem, saying what stands in for it."""
    lines: list[str] = []
    if tenants.source == SOURCE_LAST_GOOD:
        lines.append(
            f"the tenants file {tenants.path} cannot be used; the last good declaration of "
            f"every tenant stays in force ({len(tenants.tenants)} tenants) until it is fixed:"
        )
        lines += [f"  - {p}" for p in tenants.file_problems]
        return lines
    for p in tenants.file_problems:
        lines.append(f"tenants file {tenants.path}: {p}")
    for m in tenants.misdeclared:
        if m.tenant_id is None:
            lines.append(
                f"an entry of {tenants.path} names no tenant; every tenant the file no "
                "longer names keeps its last good declaration:"
            )
            lines += [f"  - {p}" for p in m.problems]
            continue
        what = f"repo {m.tenant_id}/{m.repo_slug}" if m.repo_slug else f"tenant {m.tenant_id}"
        stands = (
            "its last good declaration stays in force"
            if m.stands == STANDS_LAST_GOOD
            else "it is not swept or served until fixed (nothing of it is retired)"
        )
        lines.append(f"{what} is misdeclared in {tenants.path}; {stands}:")
        lines += [f"  - {p}" for p in m.problems]
    return lines


def misdeclared_sweeps(
    tenants: TenantsFile, tenant: str | None = None, repo: str | None = None
) -> list[dict[str, Any]]:
    """What ``neo-assets sweep`` reports for the withheld repos of its run set (a
    misdeclared repo no last good declaration stands in for): not swept, outcome
    ``misdeclared``, with the line and the fix. A wholly withheld tenant is one entry
    with ``repoSlug`` None."""
    out = []
    for tid, slug in tenants.withheld:
        if tenant is not None and tid != tenant:
            continue
        if repo is not None and slug not in (repo, None):
            continue
        if slug is None and any(t.id == tid for t in tenants.tenants):
            continue  # its named repos are swept; the unnamed entry is on every one of them
        entry = misdeclared_for(tenants, tid, slug or "")
        out.append(
            {
                "tenantId": tid,
                "repoSlug": slug,
                "outcome": codes.OUTCOME_MISDECLARED,
                "revision": None,
                "counts": {},
                "deferredCauseCode": None,
                "error": str(entry.problems[0]) if entry is not None and entry.problems else None,
                "misdeclared": misdeclared_doc(entry) if entry is not None else None,
            }
        )
    return out


def mark_misdeclared(repos: list[dict[str, Any]], tenants: TenantsFile) -> None:
    """Set each status row's ``misdeclared`` (None when its entry is fine or it is
    retired)."""
    for entry in repos:
        found = None
        if not entry.get("retired"):
            found = misdeclared_for(tenants, entry["tenantId"], entry["repoSlug"])
        entry["misdeclared"] = misdeclared_doc(found) if found is not None else None


def withheld_repo_rows(
    tenants: TenantsFile, ledger: Ledger, store: "ChromaStore"
) -> list[dict[str, Any]]:
    """One status row per withheld repo (misdeclared, no last good declaration): what
    the ledger last recorded and the rows it keeps; for a wholly withheld tenant, each
    repo the ledger knows of it (one row with ``repoSlug`` None when it knows none)."""
    states = {(s["tenant_id"], s["repo_slug"]): s for s in ledger.all_repo_states()}
    declared = {(t.id, r.slug) for t in tenants.tenants for r in t.repos}
    names: list[tuple[str, str | None]] = []
    for tid, slug in tenants.withheld:
        if slug is not None:
            names.append((tid, slug))
            continue
        known = sorted(s for t, s in states if t == tid and (t, s) not in declared)
        if known:
            names += [(tid, s) for s in known]
        elif not any(t.id == tid for t in tenants.tenants):
            names.append((tid, None))
    out = []
    for tid, slug in dict.fromkeys(names):
        state = states.get((tid, slug or ""), {})
        out.append(
            remembered_repo_row(
                tid,
                slug,
                state,
                store,
                outcome=state.get("last_outcome"),
                cause=state.get("deferred_cause_code"),
            )
            | {"retired": False, "withheld": True}
        )
    return out


def tenant_verdict(tenants: TenantsFile, tenant_id: str) -> DeclarationVerdict:
    """The ``declaration`` check of one tenant: its own misdeclarations only (another
    tenant's never fail it); a file that cannot be read at all is every tenant's."""
    entries = [misdeclared_doc(m) for m in tenants.misdeclared if m.tenant_id == tenant_id]
    unreadable = tenants.source == SOURCE_LAST_GOOD
    return declaration_verdict(
        str(tenants.path),
        entries,
        source=tenants.source,
        file_problems=[problem_doc(p) for p in tenants.file_problems] if unreadable else [],
        scope=f"tenant {tenant_id}",
    )


def file_verdict(tenants: TenantsFile) -> DeclarationVerdict:
    """The ``tenants_file`` check: every problem of the file, including entries that
    name no tenant and problems of the file as a whole."""
    return declaration_verdict(
        str(tenants.path),
        [misdeclared_doc(m) for m in tenants.misdeclared],
        source=tenants.source,
        file_problems=[problem_doc(p) for p in tenants.file_problems],
    )


def remembered_repo_row(
    tenant_id: str,
    repo_slug: str | None,
    state: dict[str, Any],
    store: "ChromaStore",
    *,
    outcome: str | None,
    cause: str | None,
) -> dict[str, Any]:
    """The status row of a repo the ledger remembers but no declaration in force sweeps
    (withheld here, retired in ``status.report``): its last state and its rows."""
    return {
        "tenantId": tenant_id,
        "repoSlug": repo_slug,
        "outcome": outcome,
        "lastIngestedRev": state.get("last_ingested_rev"),
        "consecutiveFailures": state.get("consecutive_failures"),
        "deferredCauseCode": cause,
        "nextDueAt": None,
        "lastAttemptAt": state.get("last_attempt_at"),
        "embeddingGeneration": state.get("embedding_generation"),
        "contentPoisonChunks": None,
        "undeliverableChunks": None,
        "secretChunks": None,
        "strikes": [],
        "rows": store.count_where(tenant_filter(tenant_id, repo_slug)),
        "error": None,
    }
