"""Self-evaluation from a repo's own history (pure): a commit is a question when it is no
merge, its subject is specific, and exactly one function or method of its source files
overlaps its changes; the answer is that function as indexed. One question per function
and per subject."""

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# The history window (commits read) and the questions kept, per repo.
DEFAULT_MAX_COMMITS = 1000
DEFAULT_MAX_QUESTIONS = 100
DEFAULT_K = 10
# A subject left with fewer words than this after cleaning says too little.
MIN_WORDS = 3
FUNCTION_KINDS = frozenset({"function", "method"})

_PREFIX = re.compile(r"^\s*(?:\[[^\]]*\]\s*)?[a-z]+(?:\([^)]*\))?!?:\s*", re.IGNORECASE)
_PR_REF = re.compile(r"\s*\((?:#\d+|[a-z0-9_.-]+/[a-z0-9_.-]+#\d+)(?:,\s*#\d+)*\)\s*$", re.I)
_TRAILING_REF = re.compile(r"\s*(?:fixes|closes|resolves|see)?\s*#\d+\s*$", re.IGNORECASE)
_PART = re.compile(r"\s*\[part \d+/\d+\]$")
# Subjects that name no behaviour: housekeeping, releases, bumps, reverts, merges.
_VAGUE = (
    ("merge", re.compile(r"^merge\b", re.I)),
    ("revert", re.compile(r"^revert\b", re.I)),
    ("release-notes", re.compile(r"\b(?:changelog|changes\.rst|release notes?|news)\b", re.I)),
    ("version", re.compile(r"\b(?:bump|release|version|v?\d+\.\d+(?:\.\d+)?)\b", re.I)),
    ("typo", re.compile(r"\btypos?\b|\bspelling\b|\bwhitespace\b", re.I)),
    (
        "housekeeping",
        re.compile(
            r"\b(?:lint|linter|linting|formatting|code style|"
            r"pre-commit|ruff|flake8|black|mypy|eslint|prettier|wip|"
            r"cleanup|clean up|tidy|nits?|deps|dependenc(?:y|ies)|"
            r"readme|docs|docstrings?)\b",
            re.I,
        ),
    ),
    ("tests", re.compile(r"\b(?:tests?|testing|flaky|coverage|benchmarks?)\b", re.I)),
    (
        "update",
        re.compile(
            r"^(?:update|updates|updated|minor|misc|fix|fixes|fixed|"
            r"small fix(?:es)?|tweak|tweaks|changes?|refactor|"
            r"improvements?)\b(?:\s+\S+)?\s*$",
            re.I,
        ),
    ),
)


def clean_subject(subject: str) -> str:
    """The subject as a question: conventional-commit prefix (``fix(core): ``), trailing
    PR / issue references (``(#123)``) and a final period cut off."""
    s = subject.strip().rstrip(".").strip()
    s = _PREFIX.sub("", s, count=1) if ":" in s[:40] else s
    s = _PR_REF.sub("", s)
    s = _TRAILING_REF.sub("", s)
    return s.strip().rstrip(".").strip()


def vague_reason(subject: str) -> str | None:
    """Why a subject cannot be a question (a closed label), or None when it can."""
    raw = subject.strip()
    if not raw:
        return "empty"
    for label, pattern in _VAGUE[:2]:  # merge, revert: on the raw subject
        if pattern.search(raw):
            return label
    cleaned = clean_subject(raw)
    for label, pattern in _VAGUE[2:]:
        if pattern.search(cleaned):
            return label
    if len(re.findall(r"[A-Za-z0-9_]+", cleaned)) < MIN_WORDS:
        return "short"
    return None


_TEST_PARTS = re.compile(
    r"(?:^|/)(?:tests?|testing|__tests__|spec|specs|e2e|examples?|docs?|benchmarks?|"
    r"fixtures?|vendor|third_party|node_modules)/",
    re.IGNORECASE,
)
_TEST_FILE = re.compile(
    r"(?:^|/)(?:test_[^/]*|[^/]*_test\.[a-z]+|[^/]*\.(?:test|spec)\.[a-z]+|conftest\.py)$",
    re.IGNORECASE,
)


def is_test_or_doc(path: str) -> bool:
    """A path under a tests/docs/examples folder, or named as a test file."""
    return bool(_TEST_PARTS.search(path) or _TEST_FILE.search(path))


# ---------------------------------------------------------------------------- diffs
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


def changed_lines(diff: str) -> dict[str, list[tuple[int, int]]]:
    """Per file of a ``git diff -U0`` (new side), the changed line ranges, inclusive. A
    pure deletion counts as the line where it happened (so the unit around it counts)."""
    out: dict[str, list[tuple[int, int]]] = {}
    path: str | None = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            target = line[4:].strip()
            path = None if target == "/dev/null" else target.removeprefix("b/")
            if path is not None:
                out.setdefault(path, [])
        elif path is not None and line.startswith("@@"):
            m = _HUNK.match(line)
            if m is None:
                continue
            start, count = int(m.group(1)), int(m.group(2) or "1")
            out[path].append((start, start + count - 1) if count else (start, start))
    return out


@dataclass(frozen=True)
class Unit:
    """A function-like unit of a file (parts of one unit merged): its path, qualified
    name, kind, line range and definition line (its first non-blank line, stripped)."""

    path: str
    qualified_name: str
    kind: str
    start_line: int
    end_line: int
    definition: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.path, self.qualified_name)


def unit_name(name: str) -> str:
    """A chunk name without its ``[part i/n]`` suffix."""
    return _PART.sub("", name)


def _holds(outer: Unit, inner: Unit) -> bool:
    """``outer``'s lines strictly hold ``inner``'s."""
    span, inner_span = (outer.start_line, outer.end_line), (inner.start_line, inner.end_line)
    return span[0] <= inner_span[0] and inner_span[1] <= span[1] and span != inner_span


def touched(units: Iterable[Unit], ranges: Sequence[tuple[int, int]]) -> set[tuple[str, str]]:
    """The keys of ``units`` whose lines overlap any of ``ranges``; an enclosing unit
    (a function around a nested one) counts only when no inner unit holds the change."""
    hit: set[tuple[str, str]] = set()
    units = list(units)
    for lo, hi in ranges:
        holding = [u for u in units if u.start_line <= hi and lo <= u.end_line]
        # the innermost units: none of them holds another one of them
        hit.update(u.key for u in holding if not any(_holds(u, o) for o in holding))
    return hit


# ---------------------------------------------------------------------------- questions
@dataclass(frozen=True)
class Commit:
    """One commit of the window as the rule sees it: its sha, parent count, subject, and
    the function-like units its changes touched per source file (tests/docs already
    out)."""

    sha: str
    parents: int
    subject: str
    touched: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Question:
    text: str
    commit: str
    subject: str
    path: str
    qualified_name: str
    definition: str


@dataclass
class QuestionSet:
    questions: list[Question]
    skipped: dict[str, int] = field(default_factory=dict)
    commits_read: int = 0


def skip_reason(commit: Commit) -> str | None:
    """Why a commit is no question before its answer is looked up, or None."""
    if commit.parents > 1:
        return "merge"
    reason = vague_reason(commit.subject)
    if reason is not None:
        return f"vague-{reason}"
    if not commit.touched:
        return "no-function"
    if len(commit.touched) > 1:
        return "several-functions"
    return None


def question_set(
    commits: Sequence[Commit],
    indexed: Mapping[tuple[str, str], Unit],
    max_questions: int = DEFAULT_MAX_QUESTIONS,
) -> QuestionSet:
    """The questions of ``commits`` (newest first) answered by a unit of ``indexed``
    (the units at the indexed revision by key), at most ``max_questions``."""
    out: list[Question] = []
    skipped: dict[str, int] = {}
    seen_keys: set[tuple[str, str]] = set()
    seen_texts: set[str] = set()
    for commit in commits:
        if len(out) >= max_questions:
            break
        reason = skip_reason(commit)
        key = next(iter(commit.touched)) if reason is None else None
        text = clean_subject(commit.subject)
        if reason is None and key not in indexed:
            reason = "gone-at-revision"
        elif reason is None and (key in seen_keys or text.lower() in seen_texts):
            reason = "duplicate"
        if reason is not None:
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        assert key is not None
        unit = indexed[key]
        seen_keys.add(key)
        seen_texts.add(text.lower())
        out.append(
            Question(
                text, commit.sha, commit.subject, unit.path, unit.qualified_name, unit.definition
            )
        )
    return QuestionSet(out, skipped, len(commits))


# ---------------------------------------------------------------------------- metrics
def answers(question: Question, path: str | None, document: str | None) -> bool:
    """A hit answers when it is of the answer's path and holds its definition line."""
    return path == question.path and question.definition in (document or "")


def rank_of(question: Question, hits: Sequence[tuple[str | None, str | None]]) -> int | None:
    """The 1-based rank of the first answering hit of ``(path, document)`` pairs."""
    return next((i for i, (p, d) in enumerate(hits, 1) if answers(question, p, d)), None)


# The figures of a self-evaluation (``Metrics``' and ``gate.QualityScore``'s fields).
FIGURES = ("recall_at_1", "recall_at_5", "recall_at_10", "mrr_at_10")


@dataclass(frozen=True)
class Metrics:
    questions: int
    recall_at_1: float
    recall_at_5: float
    recall_at_10: float
    mrr_at_10: float


def metrics(ranks: Sequence[int | None]) -> Metrics:
    """Recall@1/5/10 and MRR@10 of the first answering ranks (None: not in the top 10)."""
    n = len(ranks)

    def share(k: int) -> float:
        return round(sum(1 for r in ranks if r is not None and r <= k) / n, 4) if n else 0.0

    mrr = sum(1.0 / r for r in ranks if r is not None and r <= 10)
    return Metrics(n, share(1), share(5), share(10), round(mrr / n, 4) if n else 0.0)


def dropped(previous: Metrics, current: Metrics, margin: float) -> list[str]:
    """The figures that fell by more than ``margin`` (absolute) since ``previous``."""
    return [n for n in FIGURES if getattr(previous, n) - getattr(current, n) > margin]
