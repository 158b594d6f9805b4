"""`neo-assets`: the command line for people at a terminal (conventions: ``cli/common.py``)."""

import asyncio
from typing import Annotated

import typer

from neo_assets.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    JsonOpt,
    UsageError,
    emit,
    err,
    load_config,
    run,
)
from neo_assets.cli.filter_options import with_filter_options
from neo_assets.code_tools.cli import register as register_code_tools
from neo_assets.core import codes
from neo_assets.declaration.rules import SOURCE_FILE
from neo_assets.health.cli import register as register_health
from neo_assets.quality.cli import register as register_quality
from neo_assets.reconcile.cli import register as register_reconcile
from neo_assets.serve.cli import register as register_serve
from neo_assets.store.private_files import owner_only_umask
from neo_assets.sweep.rules import summary as keys

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Keep the multi-tenant code knowledge base true (sweeps, status, queries).",
)


# ------------------------------------------------------------------------------ sweep
@app.command()
def sweep(
    tenant: Annotated[str | None, typer.Option(help="only this tenant")] = None,
    repo: Annotated[str | None, typer.Option(help="only this repo slug")] = None,
    force: Annotated[bool, typer.Option("--force", help="sweep even if not due")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run due sweeps (all with --force) through Dagster, so the runs show in the UI."""

    def go() -> int:
        return run_sweep_command(tenant, repo, force, as_json)

    run(go, as_json)


def run_sweep_command(tenant: str | None, repo: str | None, force: bool, as_json: bool) -> int:
    """The body of ``neo-assets sweep``: check the run set, sweep it, report, exit code."""
    from neo_assets.declaration.in_force import (
        declaration_doc,
        misdeclared_doc,
        misdeclared_for,
        misdeclared_sweeps,
    )

    settings, tenants = load_config()  # a config error exits before Dagster is imported
    # A misdeclared repo with no last good declaration is withheld: reported, not swept.
    withheld = misdeclared_sweeps(tenants, tenant, repo)
    check_sweep_run_set(tenants, tenant, repo, withheld)
    from neo_assets.cli.launch import dagster_instance, run_sweeps

    instance = dagster_instance(settings)
    results = run_sweeps(
        settings, tenants, instance, tenant=tenant, repo=repo, force=force, console=err
    )
    for r in results:  # swept on its last good declaration: still to be fixed
        found = misdeclared_for(tenants, r["tenantId"], r["repoSlug"])
        r["misdeclared"] = misdeclared_doc(found) if found is not None else None
    results += withheld
    # The counts in both spellings for one release (README, "Deprecated keys").
    emit(
        {
            "repos": [with_deprecated_keys(r) for r in results],
            "declaration": declaration_doc(tenants),
        },
        as_json,
    )
    if not as_json:
        for r in results:
            print_sweep_result(r)
    return EXIT_FAILED if sweep_failed(tenants, tenant, repo, results) else EXIT_OK


def check_sweep_run_set(tenants, tenant: str | None, repo: str | None, withheld: list) -> None:
    """A usage error for a tenant or repo the file does not declare (nor withholds)."""
    if withheld:
        return
    if tenant and tenants.tenant(tenant) is None:
        raise UsageError(f"no tenant {tenant!r} in {tenants.path}")
    selected = [r.slug for t, r in tenants.iter_repos() if tenant is None or t.id == tenant]
    if repo and repo not in selected:
        raise UsageError(f"no repo {repo!r} declared in {tenants.path}")


def print_sweep_result(r: dict) -> None:
    """One repo's line of the human sweep report, on stderr."""
    c = r.get("counts", {})
    if r["outcome"] == codes.OUTCOME_MISDECLARED:
        err.print(
            f"{r['tenantId']}/{r['repoSlug'] or '*'}: misdeclared, not swept "
            f"(line {r['misdeclared'] and r['misdeclared']['line']}): {r['error']}",
            highlight=False,
            soft_wrap=True,
        )
        return
    if r["outcome"] == codes.OUTCOME_FAILED and "retryAfter" in r:
        # not due: its last sweep failed and waits for its backoff (or a fix)
        err.print(
            f"{r['tenantId']}/{r['repoSlug']}: failed ("
            f"retry after {r['retryAfter'] or 'unknown'}"
            + (f"; {r['deferredCauseCode']}" if r.get("deferredCauseCode") else "")
            + (f": {r['error']}" if r.get("error") else "")
            + ")",
            highlight=False,
        )
        return
    if r["outcome"] == codes.OUTCOME_SKIPPED:
        err.print(
            f"{r['tenantId']}/{r['repoSlug']}: skipped (not due; "
            f"rev {str(r.get('revision'))[:12]})",
            highlight=False,
        )
        return
    err.print(
        f"{r['tenantId']}/{r['repoSlug']}: {r['outcome']}"
        + (f" ({r['deferredCauseCode']})" if r.get("deferredCauseCode") else "")
        + f"  rev {str(r.get('revision'))[:12]}  chunks {c.get('chunks', 0)}"
        + f"  new {c.get(keys.EMBEDDED, 0)}  present {c.get(keys.ALREADY_PRESENT, 0)}"
        + f"  fenced {c.get(keys.FENCED_POISON, 0)}"
        + f"+{c.get(keys.FENCED_UNDELIVERABLE, 0)}"
        + (f"  error: {r['error']}" if r.get("error") else ""),
        highlight=False,
    )
    for notice in r.get("notices") or []:
        err.print(f"  note: {notice}", highlight=False)


def sweep_failed(tenants, tenant: str | None, repo: str | None, results: list[dict]) -> bool:
    """Whether the sweep command fails (exit 1): a misdeclared repo in the run set, an
    unreadable file, or any file problem when the run set is all of it: the file needs a fix."""
    everything = tenant is None and repo is None
    return (
        tenants.source != SOURCE_FILE
        or (everything and (tenants.retires_nothing or bool(tenants.misdeclared)))
        or any(
            r["outcome"] in (codes.OUTCOME_FAILED, codes.OUTCOME_MISDECLARED)
            or r.get("misdeclared")
            # deferred, but nothing will heal by waiting: the provider is not there
            or r.get("deferredCauseCode") == codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE
            for r in results
        )
    )


# ------------------------------------------------------------------------------ status
@app.command()
def status(
    as_json: JsonOpt = False,
) -> None:
    """The per-repo snapshot: checkpoint, outcome, causes, censuses, strikes, rows."""

    def go() -> int:
        from neo_assets.services.handles import open_ledger, open_store
        from neo_assets.status.report import build_status

        settings, tenants = load_config()
        with open_ledger(settings) as ledger, open_store(settings) as store:
            snap = build_status(settings, tenants, ledger, store)
        emit(snap, as_json)
        if not as_json:
            for r in snap["repos"]:
                poison = r["contentPoisonChunks"]
                undeliverable = r["undeliverableChunks"]
                err.print(
                    f"{r['tenantId']}/{r['repoSlug'] or '*'}: "
                    + ("MISDECLARED " if r.get("misdeclared") else "")
                    + f"{r['outcome'] or 'never swept'} "
                    f"rev {str(r['lastIngestedRev'])[:12]} rows {r['rows']} "
                    f"failures {r['consecutiveFailures']} "
                    + (f"cause {r['deferredCauseCode']} " if r["deferredCauseCode"] else "")
                    + f"poison {poison['count'] if poison else None} "
                    + f"undeliverable {undeliverable['count'] if undeliverable else None} "
                    + secrets_line(r.get("secretChunks"))
                    + generation_line(r)
                    + (
                        f" — {r['stateDetail']}"
                        if r.get("state") in ("deferred", "failed", "retired", "misdeclared")
                        else ""
                    ),
                    highlight=False,
                    soft_wrap=True,
                )
        return EXIT_OK

    run(go, as_json)


def secrets_line(census: dict | None) -> str:
    """``secrets N (path:line rule, ...)``: where the fenced secrets are, never what."""
    if not census or not census.get("count"):
        return ""
    where = ", ".join(f"{e['path']}:{e['line']} {e['rule']}" for e in census.get("locations", []))
    return f"secrets {census['count']} ({where}) "


def generation_line(repo: dict) -> str:
    """``serving <gen>`` and, while another one builds, ``building <gen> <present>/<chunks>``."""
    line = f"serving {repo.get('servingGeneration')}"
    progress = repo.get("buildingProgress")
    if repo.get("buildingGeneration"):
        done = f"{progress.get('present')}/{progress.get('chunks')}" if progress else "?"
        line += f" building {repo['buildingGeneration']} {done}"
    gate = repo.get("qualityGate")
    if gate and gate.get("state") in ("refused", "pending"):
        line += f" held by the quality gate ({gate['state']}: {gate['reason']})"
    gate = repo.get("parserGate")
    if gate and gate.get("state") in ("refused", "pending"):
        line += (
            f"; parser {gate['candidate']} held by the quality gate "
            f"({gate['state']}: {gate['reason']})"
        )
    return line


# ------------------------------------------------------------------------------ query
SNIPPET_LINES = 4


def snippet(document: str, lines: int = SNIPPET_LINES) -> list[str]:
    """The first non-blank lines of a hit, each cut to 120 characters."""
    shown = [line.rstrip()[:120] for line in document.splitlines() if line.strip()]
    return shown[:lines] + (["…"] if len(shown) > lines else [])


@app.command()
@with_filter_options
def query(
    text: Annotated[str, typer.Argument(help="what to look for")],
    tenant: Annotated[str, typer.Option(help="the tenant whose rows are searched")],
    repo: Annotated[str | None, typer.Option(help="only this repo slug")] = None,
    k: Annotated[int, typer.Option("-k", min=1, max=100, help="results")] = 5,
    expand: Annotated[bool, typer.Option("--expand", help="add linked chunks")] = False,
    as_json: JsonOpt = False,
    **filters: str | None,
) -> None:
    """Tenant-scoped retrieval over the shared collection."""

    def go() -> int:
        from neo_assets.query.one_shot import run_query
        from neo_assets.query.serving import QueryUnavailable
        from neo_assets.services.handles import open_ledger, open_store

        settings, tenants = load_config()
        declared = next((t for t in tenants.tenants if t.id == tenant), None)
        if declared is None and (tenant, None) in tenants.withheld:
            raise UsageError(
                f"tenant {tenant!r} is misdeclared in {tenants.path} and has no last good "
                "declaration, so it is not served until the file is fixed (see the warning)"
            )
        if declared is None:
            raise UsageError(f"no tenant {tenant!r} in {tenants.path}; query one that is declared")
        from neo_assets.query.rules.request import QueryInputError

        try:
            with open_ledger(settings) as ledger, open_store(settings) as store:
                doc = asyncio.run(
                    run_query(
                        settings,
                        store,
                        ledger,
                        text,
                        tenant=tenant,
                        repo=repo,
                        k=k,
                        expand=expand,
                        filters=filters,
                    )
                )
        except QueryUnavailable as exc:
            err.print(f"[red]error:[/red] {exc}", markup=True, highlight=False)
            if as_json:
                emit({"error": str(exc), "code": exc.code, "notices": exc.notices}, True)
            return EXIT_FAILED
        except QueryInputError as exc:  # an undeclared repo, an empty question, ...
            raise UsageError(exc.message) from None
        emit(doc, as_json)
        for notice in doc.get("notices", []):
            err.print(f"[yellow]note:[/yellow] {notice['message']}", markup=True, highlight=False)
        if not as_json:
            for r in doc["results"]:
                m = r["metadata"]
                # The cosine similarity reads as "how close" (the fused score is a rank sum).
                sim = r.get("similarity")
                err.print(
                    f"{'  -  ' if sim is None else f'{sim:.2f}'} "
                    f"{m.get('repoSlug')}:{m.get('sourcePath')}"
                    f":{m.get('startLine')}-{m.get('endLine')} {m.get('kind')} "
                    f"{m.get('qualifiedName') or m.get('name')}",
                    highlight=False,
                )
                for line in snippet(r.get("document") or ""):
                    err.print(f"    │ {line}", highlight=False, markup=False)
                for n in r.get("neighbours", []):
                    nm = n["metadata"]
                    err.print(
                        f"    ↳ {n['linkKind']} {n['score']:.3f} {nm.get('sourcePath')}"
                        f":{nm.get('startLine')}-{nm.get('endLine')} "
                        f"{nm.get('kind')} {nm.get('name')}",
                        highlight=False,
                    )
        return EXIT_OK

    run(go, as_json)


register_health(app)
register_reconcile(app)
register_serve(app)
register_quality(app)
register_code_tools(app)


def main() -> None:
    owner_only_umask()  # the ledger, Chroma's files and Dagster's logs: the owner's only
    app()


if __name__ == "__main__":
    main()


def with_deprecated_keys(repo: dict) -> dict:
    """One repo's sweep entry with its counts and timings also under their names before
    camelCase (README, "Deprecated keys")."""
    out = dict(repo)
    counts = repo.get("counts")
    if isinstance(counts, dict) and counts:
        out["counts"] = keys.with_deprecated_spellings(counts)
    timings = repo.get("timings")
    if isinstance(timings, dict) and timings:
        out["timings"] = keys.with_deprecated_timing_keys(timings)
    return out
