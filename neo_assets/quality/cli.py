"""`neo-assets eval`: how good the answers are for a tenant's repos, measured on questions
drawn from each repo's own history (``quality.evaluate``); `neo-assets quality evaluate`
runs the due self-evaluations, and `quality allow` lets an operator's generation serve a
tenant past the quality gate, with a reason kept in the ledger (`status` shows the gate's
verdict). Registered by ``neo_assets/cli/app.py``."""

import getpass
import time
from typing import Annotated

import typer

from neo_assets.cli import common
from neo_assets.quality.rules import DEFAULT_K, DEFAULT_MAX_COMMITS, DEFAULT_MAX_QUESTIONS


def register(app: typer.Typer) -> None:
    """Add ``eval`` and the ``quality`` commands to ``app``."""

    @app.command("eval")
    def eval_(
        tenant: Annotated[str, typer.Option(help="the tenant whose repos are evaluated")],
        repo: Annotated[str | None, typer.Option(help="only this repo slug")] = None,
        max_commits: Annotated[
            int, typer.Option(min=1, max=100_000, help="history window: last N commits")
        ] = DEFAULT_MAX_COMMITS,
        max_questions: Annotated[
            int, typer.Option(min=1, max=10_000, help="questions kept per repo")
        ] = DEFAULT_MAX_QUESTIONS,
        path: Annotated[
            list[str] | None, typer.Option(help="only commits touching this path (repeat)")
        ] = None,
        as_json: common.JsonOpt = False,
    ) -> None:
        """Self-evaluation: recall@1/5/10 and MRR@10 per repo, from its own commits."""
        common.run(
            lambda: _eval(tenant, repo, max_commits, max_questions, tuple(path or ()), as_json),
            as_json,
        )

    quality_app = typer.Typer(
        help="Answer quality: the gate on embedding-generation and parser-version switches.",
        no_args_is_help=True,
    )
    app.add_typer(quality_app, name="quality")

    @quality_app.command("evaluate")
    def evaluate(
        tenant: Annotated[str, typer.Option(help="the tenant whose due evaluations run")],
        as_json: common.JsonOpt = False,
    ) -> None:
        """Run and record the tenant's due self-evaluations now (what the sweep step does
        after a sweep): the serving generation's at each repo's indexed revision, and a
        new generation's or parser version's the quality gate waits on."""
        common.run(lambda: _evaluate(tenant, as_json), as_json)

    @quality_app.command("allow")
    def allow(
        tenant: Annotated[str, typer.Argument(help="the tenant whose switch is held")],
        generation: Annotated[
            str,
            typer.Argument(
                help="the embedding generation, or parser:<id>@<version>, to let serve "
                "(`status` names it)"
            ),
        ],
        reason: Annotated[str, typer.Option(help="why: kept in the ledger with your name")],
        as_json: common.JsonOpt = False,
    ) -> None:
        """Let GENERATION (or a parser version) serve TENANT although its self-evaluation
        is worse (or not yet measured); the decision is recorded with who made it and why."""
        common.run(lambda: _allow(tenant, generation, reason, as_json), as_json)


def _eval(
    tenant: str,
    repo: str | None,
    max_commits: int,
    max_questions: int,
    paths: tuple[str, ...],
    as_json: bool,
) -> int:
    import asyncio

    from neo_assets.query.serving import Resident
    from neo_assets.services.handles import open_ledger, open_store

    settings, tenants = common.load_config()
    declared = next((t for t in tenants.tenants if t.id == tenant), None)
    if declared is None:
        raise common.UsageError(
            f"no tenant {tenant!r} in {tenants.path}; evaluate one that is declared"
        )
    slugs = [r.slug for r in declared.repos if repo is None or r.slug == repo]
    if not slugs:
        raise common.UsageError(
            f"no repo {repo!r} declared for tenant {tenant!r} in {tenants.path}"
        )
    with open_ledger(settings) as ledger, open_store(settings) as store:
        resident = Resident(settings, store, ledger)
        reports = asyncio.run(_each(resident, tenant, slugs, max_commits, max_questions, paths))
    common.emit({"tenantId": tenant, "repos": reports}, as_json)
    return common.EXIT_FAILED if any("error" in r for r in reports) else common.EXIT_OK


async def _each(
    resident, tenant: str, slugs: list[str], max_commits: int, max_questions: int, paths
) -> list[dict]:
    """Each repo's report (or its error, printed), in order."""
    from neo_assets.quality.evaluate import QualityUnavailable, evaluate_repo_async
    from neo_assets.query.search import QueryService
    from neo_assets.query.serving import QueryUnavailable

    reports: list[dict] = []
    service = QueryService(resident)
    try:
        for slug in slugs:
            try:
                report = await evaluate_repo_async(
                    service,
                    tenant,
                    slug,
                    max_commits=max_commits,
                    max_questions=max_questions,
                    k=DEFAULT_K,
                    paths=paths,
                )
            except (QualityUnavailable, QueryUnavailable) as exc:
                common.err.print(f"[red]error:[/red] {exc}", markup=True, highlight=False)
                reports.append({"tenantId": tenant, "repoSlug": slug, "error": str(exc)})
                continue
            doc = report.to_doc()
            reports.append(doc)
            m = report.metrics
            common.err.print(
                f"{tenant}/{slug} @ {report.revision[:12]}: {doc['questionCount']} questions "
                f"from {doc['commitsRead']} commits — recall@1 {m.recall_at_1:.2f}, "
                f"recall@5 {m.recall_at_5:.2f}, recall@10 {m.recall_at_10:.2f}, "
                f"MRR@10 {m.mrr_at_10:.2f} ({report.seconds:.1f} s)",
                highlight=False,
            )
    finally:
        await resident.aclose()
    return reports


def _known_tenant(tenants, tenant: str) -> None:
    if tenants.tenant(tenant) is None:
        raise common.UsageError(f"no tenant {tenant!r} in {tenants.path}; name a declared tenant")


def _evaluate(tenant: str, as_json: bool) -> int:
    import anyio

    from neo_assets.quality.measure import evaluate_due
    from neo_assets.query.search import QueryService
    from neo_assets.query.serving import Resident
    from neo_assets.services.handles import open_ledger, open_store

    settings, tenants = common.load_config()
    _known_tenant(tenants, tenant)
    with open_ledger(settings) as ledger, open_store(settings) as store:
        resident = Resident(settings, store, ledger)
        try:
            measured = anyio.run(evaluate_due, QueryService(resident), tenant)
        finally:
            anyio.run(resident.aclose)
    doc = {
        "tenantId": tenant,
        "evaluations": [
            {
                "repoSlug": m.due.repo_slug,
                "generation": m.due.generation,
                "reason": m.due.reason,
                "problem": m.problem,
                **(
                    {
                        "questions": m.score.questions,
                        "recallAt10": m.score.recall_at_10,
                        "mrrAt10": m.score.mrr_at_10,
                    }
                    if m.score
                    else {}
                ),
            }
            for m in measured
        ],
    }
    common.emit(doc, as_json)
    if not as_json:
        for m in measured:
            common.err.print(
                f"{tenant}/{m.due.repo_slug} at {m.due.generation}: "
                + (m.figures() or f"not evaluated ({m.problem})"),
                highlight=False,
            )
        if not measured:
            common.err.print(f"{tenant}: no evaluation is due", highlight=False)
    return common.EXIT_OK


def _allow(tenant: str, generation: str, reason: str, as_json: bool) -> int:
    from neo_assets.generations.records import generation_records
    from neo_assets.quality.parser_switch import settle_repo
    from neo_assets.quality.records import record_decision
    from neo_assets.services.handles import open_ledger

    settings, tenants = common.load_config()
    _known_tenant(tenants, tenant)
    if not reason.strip():
        raise common.UsageError("--reason: say why the switch is allowed")
    declared = tenants.tenant(tenant)
    with open_ledger(settings) as ledger:
        if generation.startswith("parser:"):
            named = {f"parser:{r.parser.id}@{r.parser.version}" for r in declared.repos}
            if generation not in named:
                raise common.UsageError(
                    f"{tenant} declares no parser {generation.removeprefix('parser:')!r} "
                    f"(declared: {', '.join(sorted(named))}); `neo-assets status` names the "
                    "one held by the gate"
                )
        else:
            known = generation_records(ledger)
            if generation not in known:
                raise common.UsageError(
                    f"no embedding generation {generation!r} in the ledger (known: "
                    f"{', '.join(sorted(known)) or 'none'}); `neo-assets status` names "
                    "the one held by the gate"
                )
        who = getpass.getuser()
        record_decision(ledger, tenant, generation, reason.strip(), who, time.time())
        settle_repo(settings, ledger, declared)  # a parser switch takes over now
    doc = {"tenantId": tenant, "generation": generation, "reason": reason, "by": who}
    common.emit(doc, as_json)
    if not as_json:
        common.err.print(
            f"{generation} may serve {tenant} past the quality gate ({who}: {reason})",
            highlight=False,
        )
    return common.EXIT_OK
