"""When a recorded git envelope can stand for a new one without listing the tree again: the
same commit under the same rules (``RULES_VERSION``), and no path recorded unreadable.
Design: docs/design/sources.md#envelope"""

import hashlib
import json
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Protocol, TypeVar

from neo_assets.core import codes

# Bump when the classification of a listed path (decoding, exclusion, modes, the cap,
# the binary test) changes: every recorded envelope is then listed afresh once.
RULES_VERSION = "2"  # 2: binary sniffing by magic numbers and control bytes


def envelope_rules(exclude: Sequence[str], max_file_bytes: int) -> str:
    """The digest of what, besides the commit, decides a git envelope."""
    plain = json.dumps(
        {"version": RULES_VERSION, "exclude": list(exclude), "maxFileBytes": max_file_bytes},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(plain.encode("utf-8")).hexdigest()


def recorded_envelope_holds(
    *,
    recorded_revision: str,
    recorded_rules: str,
    recorded_skip_reasons: Iterable[str | None],
    revision: str,
    rules: str,
) -> bool:
    """Whether the recorded envelope is the envelope of ``revision`` under ``rules``.

    An empty recorded digest (an envelope recorded before the rules were) never holds."""
    return recorded_revision == revision and recorded_envelope_extends(
        recorded_revision=recorded_revision,
        recorded_rules=recorded_rules,
        recorded_skip_reasons=recorded_skip_reasons,
        rules=rules,
    )


def recorded_envelope_extends(
    *,
    recorded_revision: str,
    recorded_rules: str,
    recorded_skip_reasons: Iterable[str | None],
    rules: str,
) -> bool:
    """Whether the recorded envelope, carried to another commit by the tree's changes
    between the two (the entries of unchanged paths kept, the changed ones listed and
    classified), is that commit's envelope under ``rules``: when it was listed under the
    same rules at a known commit, and holds no path recorded unreadable (see above)."""
    if not recorded_rules or recorded_rules != rules or not recorded_revision:
        return False
    return all(reason != codes.SKIP_UNREADABLE for reason in recorded_skip_reasons)


class _Entry(Protocol):
    @property
    def path(self) -> str: ...


E = TypeVar("E", bound=_Entry)


def envelope_delta(
    recorded: Sequence[E], entries: Sequence[E], key: Callable[[E], Hashable]
) -> tuple[list[E], list[str]] | None:
    """How to record ``entries`` over the ``recorded`` envelope by rewriting only what
    changed: (the entries whose ``key``, what the ledger keeps of them, differs from the
    recorded one, the recorded paths to delete first: those rewritten and those gone).
    None when most of it changed, so rewriting it whole costs no more."""
    before = {e.path: key(e) for e in recorded}
    changed = [e for e in entries if before.get(e.path) != key(e)]
    gone = before.keys() - {e.path for e in entries}
    if 2 * (len(changed) + len(gone)) > len(entries):
        return None
    return changed, sorted({e.path for e in changed if e.path in before} | gone)
