"""Self-evaluation of one indexed repo through the query library agents use: its question
set drawn from its own history at the indexed revision, each asked through
``QueryService.search``, figures in a ``QualityReport``. No Dagster."""

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, TypedDict, Unpack

import anyio

from neo_assets.quality.history import HistoryUnavailable, build_question_set
from neo_assets.quality.rules import (
    DEFAULT_K,
    DEFAULT_MAX_COMMITS,
    DEFAULT_MAX_QUESTIONS,
    Metrics,
    Question,
    QuestionSet,
    metrics,
    rank_of,
)
from neo_assets.query.rules.request import SearchRequest
from neo_assets.query.search import QueryService


class QualityUnavailable(RuntimeError):
    """The repo cannot be evaluated (one line naming the repo and the fix)."""


@dataclass(frozen=True)
class QuestionResult:
    question: str
    commit: str
    path: str
    qualifiedName: str  # noqa: N815 - the JSON key
    rank: int | None


@dataclass
class QualityReport:
    tenant_id: str
    repo_slug: str
    revision: str
    embedding_generation: str | None
    metrics: Metrics
    questions: list[QuestionResult]
    skipped: dict[str, int] = field(default_factory=dict)
    commits_read: int = 0
    seconds: float = 0.0

    def to_doc(self) -> dict[str, Any]:
        return {
            "tenantId": self.tenant_id,
            "repoSlug": self.repo_slug,
            "revision": self.revision,
            "embeddingGeneration": self.embedding_generation,
            "questionCount": self.metrics.questions,
            "recallAt1": self.metrics.recall_at_1,
            "recallAt5": self.metrics.recall_at_5,
            "recallAt10": self.metrics.recall_at_10,
            "mrrAt10": self.metrics.mrr_at_10,
            "commitsRead": self.commits_read,
            "skipped": dict(sorted(self.skipped.items())),
            "seconds": round(self.seconds, 2),
            "questions": [asdict(q) for q in self.questions],
        }


def repo_question_set(
    service: QueryService,
    tenant_id: str,
    repo_slug: str,
    *,
    max_commits: int = DEFAULT_MAX_COMMITS,
    max_questions: int = DEFAULT_MAX_QUESTIONS,
    paths: Sequence[str] = (),
    skip: int = 0,
) -> tuple[str, QuestionSet]:
    """(indexed revision, question set) of a declared, swept git repo."""
    tenant = service.resident.tenants().tenant(tenant_id)
    repo = next((r for r in tenant.repos if r.slug == repo_slug), None) if tenant else None
    if repo is None:
        raise QualityUnavailable(
            f"no repo {repo_slug!r} declared for tenant {tenant_id!r}; evaluate a declared repo"
        )
    state = service.resident.ledger.repo_state(tenant_id, repo_slug) or {}
    revision = state.get("last_ingested_rev")
    if not revision:
        raise QualityUnavailable(
            f"{tenant_id}/{repo_slug} is not indexed yet; run `neo-assets sweep` first"
        )
    view = service.view(tenant_id)
    served = view.repos.get(repo_slug)
    served_paths = frozenset(served.paths) if served is not None else frozenset()
    try:
        qs = build_question_set(
            repo.path,
            revision,
            repo.parser.version,
            max_commits=max_commits,
            max_questions=max_questions,
            paths=paths,
            served_paths=served_paths,
            skip=skip,
        )
    except HistoryUnavailable as exc:
        raise QualityUnavailable(f"{tenant_id}/{repo_slug}: {exc}") from None
    return revision, qs


async def ask(
    service: QueryService,
    tenant_id: str,
    repo_slug: str,
    questions: Sequence[Question],
    *,
    k: int = DEFAULT_K,
    hybrid: bool | None = None,
    generation: str | None = None,
) -> tuple[list[int | None], str | None]:
    """Each question's first answering rank (None: not in the top ``k``) through the
    query library, and the embedding generation that answered (``generation`` pins one:
    the gate measures a generation that may not serve yet)."""
    ranks: list[int | None] = []
    answered = None
    for q in questions:
        doc = await service.search(
            tenant_id,
            SearchRequest(query=q.text, k=k, repo=repo_slug),
            hybrid=hybrid,
            generation=generation,
        )
        answered = doc.get("embeddingGeneration", answered)
        ranks.append(rank_of(q, [(r.get("path"), r.get("document")) for r in doc["results"]]))
    return ranks, answered


async def evaluate_repo_async(
    service: QueryService,
    tenant_id: str,
    repo_slug: str,
    *,
    max_commits: int = DEFAULT_MAX_COMMITS,
    max_questions: int = DEFAULT_MAX_QUESTIONS,
    k: int = DEFAULT_K,
    paths: Sequence[str] = (),
    hybrid: bool | None = None,
) -> QualityReport:
    started = time.perf_counter()
    revision, qs = await anyio.to_thread.run_sync(
        lambda: repo_question_set(
            service,
            tenant_id,
            repo_slug,
            max_commits=max_commits,
            max_questions=max_questions,
            paths=paths,
        )
    )
    if not qs.questions:
        raise QualityUnavailable(
            f"{tenant_id}/{repo_slug}: no commit of the last {qs.commits_read} gives a "
            f"question (skipped: {qs.skipped}); widen the window (--max-commits)"
        )
    ranks, generation = await ask(service, tenant_id, repo_slug, qs.questions, k=k, hybrid=hybrid)
    return QualityReport(
        tenant_id=tenant_id,
        repo_slug=repo_slug,
        revision=revision,
        embedding_generation=generation,
        metrics=metrics(ranks),
        questions=[
            QuestionResult(q.text, q.commit, q.path, q.qualified_name, r)
            for q, r in zip(qs.questions, ranks, strict=True)
        ],
        skipped=qs.skipped,
        commits_read=qs.commits_read,
        seconds=time.perf_counter() - started,
    )


class EvaluateOptions(TypedDict, total=False):
    """``evaluate_repo_async``'s keyword options."""

    max_commits: int
    max_questions: int
    k: int
    paths: Sequence[str]
    hybrid: bool | None


def evaluate_repo(
    service: QueryService, tenant_id: str, repo_slug: str, **options: Unpack[EvaluateOptions]
) -> QualityReport:
    """``evaluate_repo_async`` from synchronous code (not inside a running event loop)."""
    return anyio.run(partial(evaluate_repo_async, service, tenant_id, repo_slug, **options))
