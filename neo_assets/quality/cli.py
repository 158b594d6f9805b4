"""`neo-assets eval`: how good the answers are for a tenant's repos, measured on questions
drawn from each repo's own history (``quality.evaluate``). Registered by
``neo_assets/cli/app.py``."""

from typing import Annotated

import typer

from neo_assets.cli import common
from neo_assets.quality.rules import DEFAULT_K, DEFAULT_MAX_COMMITS, DEFAULT_MAX_QUESTIONS


def register(app: typer.Typer) -> None:
    """Add ``eval`` to ``app``."""

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
