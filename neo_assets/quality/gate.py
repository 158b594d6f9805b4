"""The quality gate: may a tenant's configured embedding generation replace the one
serving it? Pure: the self-evaluations and the operator's decisions are arguments.

The configured generation switches in when, for every repo of the tenant, its
self-evaluation is not worse than the serving generation's by more than ``margin`` (an
absolute drop of MRR@10 or recall@10), both measured on the same questions. A repo with
no questions (no history to draw from) is no evidence either way. Until both are
evaluated the switch waits (``pending``); an operator's recorded decision lets a refused
or pending generation serve (``overridden``)."""

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

PASSED = "passed"
REFUSED = "refused"
PENDING = "pending"
OVERRIDDEN = "overridden"
OFF = "off"
STATES = (PASSED, REFUSED, PENDING, OVERRIDDEN, OFF)


@dataclass(frozen=True)
class QualityScore:
    """One self-evaluation of one repo at one embedding generation."""

    repo_slug: str
    generation: str
    questions: int
    recall_at_1: float
    recall_at_5: float
    recall_at_10: float
    mrr_at_10: float
    question_set: str = ""  # digest of the questions: only equal sets are compared
    evaluated_at: float = 0.0
    revision: str = ""  # the repo's indexed revision the questions were drawn at


def question_set_digest(questions: Sequence[tuple[str, str, str]]) -> str:
    """The digest of a question set: (question, answer path, definition line) each."""
    canonical = json.dumps([list(q) for q in questions], separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class EvaluationDue:
    repo_slug: str
    generation: str
    reason: str


def evaluations_due(
    repo_slugs: Iterable[str],
    revisions: Mapping[str, str | None],
    serving: str | None,
    candidate: str | None,
    latest: Mapping[tuple[str, str], QualityScore],
) -> list[EvaluationDue]:
    """Which (repo, generation) self-evaluations are due: the serving generation's when
    the repo's indexed revision moved since its last one (quality over time), and, while
    a switch waits on the gate, the candidate's and the serving one's at the same
    revision (the gate compares only equal question sets). A repo never indexed has
    nothing to evaluate."""
    due: list[EvaluationDue] = []
    for slug in sorted(set(repo_slugs)):
        revision = revisions.get(slug)
        if not revision:
            continue
        for generation, why in ((serving, "revision"), (candidate, "switch")):
            if generation is None or (why == "switch" and generation == serving):
                continue
            last = latest.get((slug, generation))
            if last is None:
                due.append(EvaluationDue(slug, generation, f"{why}: never evaluated"))
            elif last.revision != revision:
                due.append(EvaluationDue(slug, generation, f"{why}: indexed at {revision[:12]}"))
    return due


@dataclass(frozen=True)
class GateVerdict:
    candidate: str
    serving: str
    state: str
    reason: str
    worse: tuple[str, ...] = ()  # the repos whose answers got worse past the margin
    waiting: tuple[str, ...] = ()  # the repos not yet evaluated at both generations

    @property
    def allowed(self) -> bool:
        return self.state in (PASSED, OVERRIDDEN, OFF)


def _drop(new: QualityScore, old: QualityScore) -> float:
    return max(old.mrr_at_10 - new.mrr_at_10, old.recall_at_10 - new.recall_at_10)


def gate(
    candidate: str,
    serving: str,
    repo_slugs: Iterable[str],
    scores: Mapping[tuple[str, str], QualityScore],
    margin: float,
    *,
    enabled: bool = True,
    overridden: bool = False,
) -> GateVerdict:
    """May ``candidate`` replace ``serving`` for a tenant over ``repo_slugs``?
    ``scores`` holds the latest self-evaluation per (repo, generation)."""
    if not enabled:
        return GateVerdict(candidate, serving, OFF, "the quality gate is off (NEO_QUALITY_GATE)")
    worse: list[str] = []
    waiting: list[str] = []
    notes: list[str] = []
    for slug in sorted(set(repo_slugs)):
        new, old = scores.get((slug, candidate)), scores.get((slug, serving))
        if new is None or old is None or new.question_set != old.question_set:
            waiting.append(slug)
        elif new.questions == 0:
            continue
        elif _drop(new, old) > margin:
            worse.append(slug)
            notes.append(
                f"{slug}: MRR@10 {old.mrr_at_10:.3f} -> {new.mrr_at_10:.3f}, "
                f"recall@10 {old.recall_at_10:.3f} -> {new.recall_at_10:.3f}"
            )
    fix = f"`neo-assets quality allow <tenant> {candidate} --reason ...` lets it serve anyway"
    if overridden and (worse or waiting):
        return GateVerdict(
            candidate,
            serving,
            OVERRIDDEN,
            "an operator's recorded decision lets it serve",
            tuple(worse),
            tuple(waiting),
        )
    if worse:
        return GateVerdict(
            candidate,
            serving,
            REFUSED,
            f"embedding generation {candidate} answers worse than {serving} by more than "
            f"{margin:.2f}: " + "; ".join(notes) + f"; {serving} keeps serving ({fix})",
            tuple(worse),
            tuple(waiting),
        )
    if waiting:
        return GateVerdict(
            candidate,
            serving,
            PENDING,
            f"embedding generation {candidate} waits for the self-evaluation of "
            f"{', '.join(waiting)} at both generations (measured by the sweep that "
            f"completes it, or now with `neo-assets quality evaluate --tenant <tenant>`); "
            f"{serving} keeps serving ({fix})",
            (),
            tuple(waiting),
        )
    return GateVerdict(candidate, serving, PASSED, "not worse on any repo's self-evaluation")
