"""Self-evaluations the gate and the ``retrieval_quality`` asset record, asked at one named
generation whether or not it serves yet, written to the ledger; then the parser switches
they decide are settled (``quality/parser_switch.py``)."""

import time
from dataclasses import asdict, dataclass

import anyio

from neo_assets.core import codes
from neo_assets.generations.serving import serving_generation
from neo_assets.quality.evaluate import QualityUnavailable, ask, repo_question_set
from neo_assets.quality.gate import (
    EvaluationDue,
    QualityScore,
    evaluations_due,
    label_generation,
    question_set_digest,
)
from neo_assets.quality.parser_switch import held_switches, serving_parsers, settle_repo
from neo_assets.quality.records import latest_scores, record_score
from neo_assets.quality.rules import metrics
from neo_assets.query.search import QueryService


@dataclass(frozen=True)
class Measured:
    """One evaluation made (``score``) or why none could be (``problem``)."""

    due: EvaluationDue
    score: QualityScore | None
    problem: str | None = None
    seconds: float = 0.0

    def figures(self) -> str | None:
        """The score as the logs and the CLI print it; None when none was made."""
        s = self.score
        if s is None:
            return None
        return (
            f"MRR@10 {s.mrr_at_10:.3f} recall@10 {s.recall_at_10:.3f} over {s.questions} questions"
        )


async def measure_at(
    service: QueryService, tenant_id: str, repo_slug: str, generation: str
) -> QualityScore:
    """The repo's self-evaluation with ``generation`` answering (no fallback; a parser
    switch's label names its generation), recorded under that label. A repo whose history
    gives no question scores 0 questions: no evidence either way."""
    revision, qs = await anyio.to_thread.run_sync(
        lambda: repo_question_set(service, tenant_id, repo_slug)
    )
    ranks, _ = await ask(
        service, tenant_id, repo_slug, qs.questions, generation=label_generation(generation)
    )
    return QualityScore(
        repo_slug=repo_slug,
        generation=generation,
        **asdict(metrics(ranks)),  # questions, recall@1/5/10, MRR@10
        question_set=question_set_digest([(q.text, q.path, q.definition) for q in qs.questions]),
        evaluated_at=time.time(),
        revision=revision,
    )


def due_for_tenant(service: QueryService, tenant_id: str) -> list[EvaluationDue]:
    """The tenant's evaluations due now (``quality.gate.evaluations_due``)."""
    resident = service.resident
    tenant = resident.tenants().tenant(tenant_id)
    if tenant is None:
        return []
    slugs = [r.slug for r in tenant.repos]
    states = {r.slug: resident.ledger.repo_state(tenant_id, r.slug) or {} for r in tenant.repos}
    # A parser switch is measured once its chunks are all there: the repo's last sweep
    # was of this declaration and complete (a partial candidate would look worse).
    built = {
        r.slug: (r.parser.id, r.parser.version)
        for r in tenant.repos
        if states[r.slug].get("last_outcome") == codes.OUTCOME_COMPLETE
        and states[r.slug].get("declaration_digest") == r.declaration_digest()
    }
    switches = held_switches(serving_parsers(resident.ledger, tenant_id), built)
    choice = serving_generation(resident.settings, resident.ledger, tenant_id, slugs)
    waiting = choice.gate is not None and not choice.gate.allowed
    revisions = {slug: states[slug].get("last_ingested_rev") for slug in slugs}
    return evaluations_due(
        slugs,
        revisions,
        choice.generation,
        choice.gate.candidate if waiting and choice.gate else None,
        latest_scores(resident.ledger, tenant_id, slugs),
        switches,
    )


async def evaluate_due(
    service: QueryService, tenant_id: str, repo_slug: str | None = None
) -> list[Measured]:
    """Run and record the tenant's due evaluations (of one repo, when named), then settle
    the parser switches they decide."""
    out = []
    released: QueryService | None = None
    for due in await anyio.to_thread.run_sync(due_for_tenant, service, tenant_id):
        if repo_slug is not None and due.repo_slug != repo_slug:
            continue
        started = time.perf_counter()
        asked = service
        if due.release:  # the candidate parser's chunks answer
            if released is None:
                released = QueryService(service.resident, release_parsers=True)
                released.vectors = service.vectors  # same rows, same vectors
            asked = released
        try:
            score = await measure_at(asked, tenant_id, due.repo_slug, due.generation)
        except QualityUnavailable as exc:
            out.append(Measured(due, None, str(exc), time.perf_counter() - started))
            continue
        await anyio.to_thread.run_sync(record_score, service.resident.ledger, tenant_id, score)
        out.append(Measured(due, score, None, time.perf_counter() - started))
    await anyio.to_thread.run_sync(settle_tenant, service, tenant_id)
    return out


def settle_tenant(service: QueryService, tenant_id: str) -> None:
    """Settle the tenant's parser switches against the evaluations recorded so far."""
    resident = service.resident
    tenant = resident.tenants().tenant(tenant_id)
    if tenant is not None:
        settle_repo(resident.settings, resident.ledger, tenant)
