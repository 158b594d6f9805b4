"""The quality gate: may a tenant's configured embedding generation (or a repo's declared
parser version) replace the one serving it? Only when no repo is worse by more than
``margin`` on the same questions; ``pending`` until both sides are evaluated; an operator's
decision overrides. Pure."""

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

PASSED = "passed"
REFUSED = "refused"
PENDING = "pending"
OVERRIDDEN = "overridden"
OFF = "off"


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


ParserIdentity = tuple[str, str]  # (parser id, version)


def parser_name(identity: ParserIdentity) -> str:
    return f"{identity[0]}@{identity[1]}"


def parser_label(generation: str, identity: ParserIdentity) -> str:
    """What a parser switch's self-evaluations are recorded under: the embedding
    generation that answered and the parser whose chunks it served (both sides of one
    switch are measured at the same generation)."""
    return f"{generation}|{parser_name(identity)}"


def label_generation(label: str) -> str:
    """The embedding generation a self-evaluation's label names (``parser_label``'s first
    part; an embedding generation's label is the generation)."""
    return label.split("|", 1)[0]


def parser_decision(identity: ParserIdentity) -> str:
    """The name an operator's decision on a parser version is recorded under (per tenant):
    ``neo-assets quality allow <tenant> parser:<id>@<version>``."""
    return f"parser:{parser_name(identity)}"


def held_switches(
    recorded: Mapping[str, ParserIdentity], declared: Mapping[str, ParserIdentity]
) -> dict[str, tuple[ParserIdentity, ParserIdentity]]:
    """Per repo whose declared parser is not the one serving it: (declared, serving)."""
    return {
        slug: (identity, recorded[slug])
        for slug, identity in declared.items()
        if slug in recorded and recorded[slug] != identity
    }


@dataclass(frozen=True)
class EvaluationDue:
    repo_slug: str
    generation: str
    reason: str
    # A parser switch's candidate side: measured with the repo's held switch released
    # (the declared parser's chunks served).
    release: bool = False


def evaluations_due(
    repo_slugs: Iterable[str],
    revisions: Mapping[str, str | None],
    serving: str | None,
    candidate: str | None,
    latest: Mapping[tuple[str, str], QualityScore],
    parser_switches: Mapping[str, tuple[ParserIdentity, ParserIdentity]] | None = None,
) -> list[EvaluationDue]:
    """Which (repo, generation) self-evaluations are due: the serving one's when the indexed
    revision moved, and while a switch waits (``parser_switches`` too) both sides' at the
    same revision, since the gate compares only equal question sets."""
    due: list[EvaluationDue] = []
    switches = parser_switches or {}
    for slug in sorted(set(repo_slugs)):
        revision = revisions.get(slug)
        if not revision:
            continue
        sides: list[tuple[str | None, str, bool]] = [
            (serving, "revision", False),
            (None if candidate == serving else candidate, "switch", False),
        ]
        if slug in switches and serving is not None:
            new, old = switches[slug]
            sides.append((parser_label(serving, new), "parser switch", True))
            sides.append((parser_label(serving, old), "parser switch", False))
        for generation, why, release in sides:
            if generation is None:
                continue
            last = latest.get((slug, generation))
            if last is None:
                reason = f"{why}: never evaluated"
            elif last.revision != revision:
                reason = f"{why}: indexed at {revision[:12]}"
            else:
                continue
            due.append(EvaluationDue(slug, generation, reason, release))
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
    subject: str = "embedding generation",
    allow: str | None = None,
    tenant: str = "<tenant>",
) -> GateVerdict:
    """May ``candidate`` replace ``serving`` for a tenant over ``repo_slugs``?
    ``scores`` holds the latest self-evaluation per (repo, candidate or serving);
    ``subject`` names what switches, ``allow`` what an operator's decision names."""
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
    fix = (
        f"`neo-assets quality allow {tenant} {allow or candidate} --reason ...` lets it "
        "serve anyway"
    )
    if overridden and (worse or waiting):
        state, reason = OVERRIDDEN, "an operator's recorded decision lets it serve"
    elif worse:
        state = REFUSED
        reason = (
            f"{subject} {candidate} answers worse than {serving} by more than "
            f"{margin:.2f}: " + "; ".join(notes) + f"; {serving} keeps serving ({fix})"
        )
    elif waiting:
        state = PENDING
        reason = (
            f"{subject} {candidate} waits for the self-evaluation of "
            f"{', '.join(waiting)} on both sides (measured by the sweep that "
            f"completes it, or now with `neo-assets quality evaluate --tenant {tenant}`); "
            f"{serving} keeps serving ({fix})"
        )
    else:
        state, reason = PASSED, "not worse on any repo's self-evaluation"
    return GateVerdict(candidate, serving, state, reason, tuple(worse), tuple(waiting))


def parser_gate(
    tenant_id: str,
    repo_slug: str,
    candidate: ParserIdentity,
    serving: ParserIdentity,
    generation: str,
    scores: Mapping[tuple[str, str], QualityScore],
    margin: float,
    *,
    enabled: bool = True,
    overridden: bool = False,
) -> GateVerdict:
    """May the repo's declared parser ``candidate`` replace ``serving`` (whose chunks
    serve it now)? Both sides' self-evaluations are the ones made at ``generation``."""
    sides = {parser_name(candidate): candidate, parser_name(serving): serving}
    picked = {
        (repo_slug, name): scores[(repo_slug, parser_label(generation, identity))]
        for name, identity in sides.items()
        if (repo_slug, parser_label(generation, identity)) in scores
    }
    return gate(
        parser_name(candidate),
        parser_name(serving),
        [repo_slug],
        picked,
        margin,
        enabled=enabled,
        overridden=overridden,
        subject="parser",
        allow=parser_decision(candidate),
        tenant=tenant_id,
    )
