"""Which declaration is in force when part of the tenants file cannot be used: a problem
stays in its repo or tenant, which keeps its last good declaration, else is *withheld*
(not swept or served, still declared, so its rows are no orphans). A misdeclaration never
retires anything: a block the rule cannot name, or an unreadable file, holds every last
good declaration in force. Pure."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Where the declaration in force came from (status --json "declaration.source").
SOURCE_FILE = "file"
SOURCE_LAST_GOOD = "last-good"

# What stands in for a misdeclared tenant or repo.
STANDS_LAST_GOOD = "last-good"
STANDS_NOTHING = "withheld"


@dataclass(frozen=True)
class TenantBlock:
    """What the file says about one tenant, as read: ``tenant_id`` None when the block names no
    tenant; tenant-level ``problems`` make the whole tenant misdeclared; usable ``repos`` and
    each repo entry's problems, by slug where it can be read."""

    tenant_id: str | None
    problems: tuple[Any, ...] = ()
    repos: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    repo_problems: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    unnamed_repo_problems: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Misdeclared:
    """One misdeclared tenant (``repo_slug`` None) or repo, or a block naming neither
    (``tenant_id`` None), its problems, and what stands in for it."""

    tenant_id: str | None
    repo_slug: str | None
    problems: tuple[Any, ...]
    stands: str  # STANDS_LAST_GOOD or STANDS_NOTHING


@dataclass(frozen=True)
class Declaration:
    """The declaration in force: tenants as plain dicts (file order, then held ones),
    what is misdeclared, what is withheld (declared but unusable: never swept, served or
    retired), the tenants whose file declaration is good (to remember as last good), and
    where it came from."""

    tenants: tuple[Mapping[str, Any], ...]
    misdeclared: tuple[Misdeclared, ...]
    withheld: tuple[tuple[str, str | None], ...]
    good: tuple[str, ...]
    source: str
    file_problems: tuple[Any, ...] = ()
    # True when some part of the file names no tenant (or the file gave none): any tenant
    # may be the one meant, so nothing may be judged retired until the file is fixed.
    retires_nothing: bool = False


def _held_tenant(plain: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": plain["id"], "repos": [dict(r) for r in plain.get("repos", [])]}


def _last_good_repos(last_good: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    if last_good is None:
        return {}
    return {str(r["slug"]): r for r in last_good.get("repos", [])}


def _block_in_force(
    block: TenantBlock,
    held: Mapping[str, Any] | None,
    misdeclared: list[Misdeclared],
    withheld: list[tuple[str, str | None]],
) -> tuple[dict[str, Any] | None, bool]:
    """What one named tenant block puts in force (``held``: its last good declaration):
    the tenant's plain declaration (None when withheld whole) and whether the block is
    good; its problems go to ``misdeclared`` and what is not served to ``withheld``."""
    tid = block.tenant_id
    assert tid is not None
    if block.problems:
        stands = STANDS_LAST_GOOD if held is not None else STANDS_NOTHING
        misdeclared.append(Misdeclared(tid, None, block.problems, stands))
        if held is None:
            withheld.append((tid, None))
            return None, False
        return _held_tenant(held), False
    previous = _last_good_repos(held)
    repos: dict[str, Mapping[str, Any]] = dict(block.repos)
    for slug, problems in block.repo_problems.items():
        if slug in previous:
            repos[slug] = previous[slug]
            misdeclared.append(Misdeclared(tid, slug, problems, STANDS_LAST_GOOD))
        else:
            withheld.append((tid, slug))
            misdeclared.append(Misdeclared(tid, slug, problems, STANDS_NOTHING))
    if block.unnamed_repo_problems:
        # An entry whose slug cannot be read may be any repo the file stopped naming:
        # each last good one stays in force, and every repo of the tenant counts as
        # declared (withheld as a whole) so none is retired.
        withheld.append((tid, None))
        for slug, repo in previous.items():
            if slug not in repos and slug not in block.repo_problems:
                repos[slug] = repo
        stands = STANDS_LAST_GOOD if held is not None else STANDS_NOTHING
        misdeclared.append(Misdeclared(tid, None, block.unnamed_repo_problems, stands))
    is_good = not block.repo_problems and not block.unnamed_repo_problems
    return {"id": tid, "repos": [dict(r) for _, r in sorted(repos.items())]}, is_good


def in_force(
    blocks: Sequence[TenantBlock],
    last_good: Mapping[str, Mapping[str, Any]],
    *,
    file_problems: Sequence[Any] = (),
    file_readable: bool = True,
) -> Declaration:
    """The declaration in force from the file's tenant ``blocks`` (file order), ``last_good``
    (tenant id -> plain declaration) and ``file_problems``; ``file_readable`` False: the
    file gave no tenants, so every last good tenant stays in force."""
    if not file_readable:
        return Declaration(
            tenants=tuple(_held_tenant(last_good[tid]) for tid in sorted(last_good)),
            misdeclared=(),
            withheld=(),
            good=(),
            source=SOURCE_LAST_GOOD,
            file_problems=tuple(file_problems),
            retires_nothing=True,
        )
    tenants: list[dict[str, Any]] = []
    misdeclared: list[Misdeclared] = []
    withheld: list[tuple[str, str | None]] = []
    good: list[str] = []
    named = {b.tenant_id for b in blocks if b.tenant_id is not None}
    unnamed_block = bool(file_problems) or any(b.tenant_id is None for b in blocks)
    for block in blocks:
        if block.tenant_id is None:
            misdeclared.append(Misdeclared(None, None, block.problems, STANDS_NOTHING))
            continue
        tenant, is_good = _block_in_force(
            block, last_good.get(block.tenant_id), misdeclared, withheld
        )
        if tenant is not None:
            tenants.append(tenant)
        if is_good:
            good.append(block.tenant_id)
    if unnamed_block:
        # A block (or the top level) that names no tenant may be any tenant the file
        # stopped naming: each one with a last good declaration stays in force, and is
        # misdeclared by those problems (its own check and status say so).
        unnamed = tuple(file_problems) + tuple(
            p for b in blocks if b.tenant_id is None for p in b.problems
        )
        for tid in sorted(last_good):
            if tid not in named:
                tenants.append(_held_tenant(last_good[tid]))
                misdeclared.append(Misdeclared(tid, None, unnamed, STANDS_LAST_GOOD))
    return Declaration(
        tenants=tuple(tenants),
        misdeclared=tuple(misdeclared),
        withheld=tuple(withheld),
        good=tuple(good),
        source=SOURCE_FILE,
        file_problems=tuple(file_problems),
        retires_nothing=unnamed_block,
    )


@dataclass(frozen=True)
class DeclarationVerdict:
    """An asset check's verdict on a declaration: passed, ERROR (else WARN) severity, the
    summary (each entry's file line, message and fix, and what stands in for it) and the
    offending entries (``tenant/repo line N``)."""

    passed: bool
    error: bool
    summary: str
    offending: tuple[str, ...]


def _entry_label(entry: Mapping[str, Any]) -> str:
    tenant = entry.get("tenantId") or "?"
    scope = f"{tenant}/{entry['repoSlug']}" if entry.get("repoSlug") else str(tenant)
    return f"{scope} line {entry.get('line') or '?'}"


def _entry_line(entry: Mapping[str, Any]) -> str:
    stands = (
        "its last good declaration stays in force"
        if entry.get("inForce") == STANDS_LAST_GOOD
        else "not swept or served until fixed; none of its rows is retired"
    )
    if entry.get("tenantId") is None:
        stands = "every tenant the file no longer names keeps its last good declaration"
    return f"- `{_entry_label(entry)}`: {entry.get('message')} — {stands}"


def declaration_verdict(
    path: str,
    entries: Sequence[Mapping[str, Any]],
    *,
    source: str = SOURCE_FILE,
    file_problems: Sequence[Mapping[str, Any]] = (),
    scope: str = "the tenants file",
) -> DeclarationVerdict:
    """The verdict on ``entries`` (status --json's misdeclared documents of the scope
    checked). Passes when there are none and the file was read. WARN while a last good
    declaration stands in for each (the knowledge base is served and swept as it was);
    ERROR when an entry stands on nothing (it is not swept or served at all)."""
    if not entries and source == SOURCE_FILE and not file_problems:
        return DeclarationVerdict(True, False, f"{scope}: declared as {path} says", ())
    lines: list[str] = []
    if source == SOURCE_LAST_GOOD:
        lines.append(
            f"{path} cannot be used; the last good declaration of every tenant stays in "
            "force until it is fixed:"
        )
    for problem in file_problems:
        lines.append(f"- `line {problem.get('line') or '?'}`: {problem.get('message')}")
    lines += [_entry_line(entry) for entry in entries]
    lines.append(
        f"Fix: edit {path} at the line named (the message says what is allowed); the next "
        "sweep applies the fixed declaration."
    )
    error = any(e.get("inForce") != STANDS_LAST_GOOD and e.get("tenantId") for e in entries)
    head = f"{scope}: {len(entries) + len(file_problems)} misdeclared in {path}"
    return DeclarationVerdict(
        passed=False,
        error=error,
        summary="\n".join([head, *lines]),
        offending=tuple(_entry_label(e) for e in entries),
    )
