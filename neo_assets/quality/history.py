"""A repo's history read for self-evaluation: the commits of the window with the units
their changes touched, and the units at the indexed revision (``rules.question_set``
decides). git through subprocesses; files parsed by the declared parser, so a unit is
what the sweep indexed.
"""

import subprocess
from collections.abc import Sequence
from pathlib import Path

from neo_assets.quality.rules import (
    DEFAULT_MAX_COMMITS,
    DEFAULT_MAX_QUESTIONS,
    FUNCTION_KINDS,
    Commit,
    QuestionSet,
    Unit,
    changed_lines,
    is_test_or_doc,
    question_set,
    skip_reason,
    touched,
    unit_name,
)
from neo_assets.sources.parsers.neo_code import PARSER_ID, chunk_file
from neo_assets.sources.rules.definition_line import definition_line as names_unit

# Files whose functions can answer a question (source code; tests/docs filtered apart).
CODE_SUFFIXES = (
    ".py .go .ts .tsx .mts .cts .js .mjs .cjs .jsx .rs .java .c .h .cc .cpp .hpp .cs .rb "
    ".php .kt .swift .scala"
).split()
_RECORD, _FIELD = "\x1e", "\x1f"
# The log as read_commits parses it: per commit its header, then its changed lines relative
# to the repo's folder (a rename as a delete and an add).
_LOG_FORM = (f"--format={_RECORD}%H{_FIELD}%P{_FIELD}%s", "-U0", "--relative", "--no-renames")


class HistoryUnavailable(RuntimeError):
    """The repo has no readable git history at the revision (one line, names the fix)."""


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, stdin=subprocess.DEVNULL, check=False
    )


def _git(root: Path, *args: str) -> str:
    done = _run(root, *args)
    if done.returncode != 0:
        line = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise HistoryUnavailable(
            f"git {args[0]} in {root}: {line[-1] if line else 'failed'}; the repo must be a "
            "git checkout holding its indexed revision"
        )
    return done.stdout.decode("utf-8", "replace")


def _show(root: Path, revision: str, path: str) -> str | None:
    done = _run(root, "show", f"{revision}:./{path}")
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None


def is_code(path: str) -> bool:
    return path.endswith(tuple(CODE_SUFFIXES)) and not is_test_or_doc(path)


def file_units(path: str, text: str, parser_version: str) -> list[Unit]:
    """The function-like units of one file by the declared parser, parts merged."""
    merged: dict[str, Unit] = {}
    for ch in chunk_file("eval", "eval", path, text, PARSER_ID, parser_version).chunks:
        if ch.kind not in FUNCTION_KINDS or ch.start_line is None or ch.end_line is None:
            continue
        qualified = unit_name(ch.qualified_name or ch.name)
        found = merged.get(qualified)
        if found is None:
            merged[qualified] = Unit(
                path, qualified, ch.kind, ch.start_line, ch.end_line, definition_line(ch)
            )
        else:
            merged[qualified] = Unit(
                path,
                qualified,
                found.kind,
                min(found.start_line, ch.start_line),
                max(found.end_line, ch.end_line),
                found.definition if found.start_line <= ch.start_line else definition_line(ch),
            )
    return list(merged.values())


def definition_line(chunk) -> str:  # noqa: ANN001 - a parser Chunk
    """The unit's line that names it (else its first non-blank line), stripped."""
    found = names_unit(unit_name(chunk.name), chunk.content or "")
    if found is not None:
        return found
    lines = [line.strip() for line in (chunk.content or "").splitlines() if line.strip()]
    return lines[0] if lines else ""


def read_commits(
    root: Path,
    revision: str,
    parser_version: str,
    *,
    max_commits: int = DEFAULT_MAX_COMMITS,
    paths: Sequence[str] = (),
    skip: int = 0,
) -> list[Commit]:
    """The last ``max_commits`` commits reachable from ``revision`` (touching ``paths``
    when given), newest first, each with the units its changes touched in code files.
    Files are read and parsed only for commits the subject rules keep."""
    flags = (f"--max-count={max_commits}", f"--skip={skip}", "--no-color", "--no-ext-diff")
    log = _git(root, "log", *flags, *_LOG_FORM, revision, "--", *(paths or ["."]))
    out: list[Commit] = []
    for record in log.split(_RECORD)[1:]:
        header, _, diff = record.partition("\n")
        sha, parents, subject = (header.split(_FIELD) + ["", ""])[:3]
        commit = Commit(sha, len(parents.split()), subject)
        if skip_reason(commit) not in (None, "no-function"):
            out.append(commit)  # merges and vague subjects: no file read
            continue
        keys: set[tuple[str, str]] = set()
        for path, ranges in changed_lines(diff).items():
            if not is_code(path) or not ranges:
                continue
            text = _show(root, sha, path)
            if text is None:
                continue
            keys |= touched(file_units(path, text, parser_version), ranges)
        out.append(Commit(sha, commit.parents, subject, frozenset(keys)))
    return out


def build_question_set(
    root: Path,
    revision: str,
    parser_version: str,
    *,
    max_commits: int = DEFAULT_MAX_COMMITS,
    max_questions: int = DEFAULT_MAX_QUESTIONS,
    paths: Sequence[str] = (),
    served_paths: frozenset[str] | None = None,
    skip: int = 0,
) -> QuestionSet:
    """The repo's question set at ``revision`` (``rules.question_set`` over the window,
    which starts ``skip`` commits back: an older, disjoint window for tuning); an
    answer's file must be among ``served_paths`` when given."""
    commits = read_commits(
        root, revision, parser_version, max_commits=max_commits, paths=paths, skip=skip
    )
    wanted = {k for c in commits if skip_reason(c) is None for k in c.touched}
    indexed: dict[tuple[str, str], Unit] = {}
    for path in sorted({p for p, _ in wanted}):
        if served_paths is not None and path not in served_paths:
            continue
        text = _show(root, revision, path)
        if text is None:
            continue
        for unit in file_units(path, text, parser_version):
            if unit.key in wanted:
                indexed[unit.key] = unit
    return question_set(commits, indexed, max_questions)
