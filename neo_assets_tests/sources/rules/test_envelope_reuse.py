"""A recorded git envelope stands for a new one only at the same commit under the same
rules, and never when it holds an unreadable path."""

import pytest

from neo_assets.core import codes
from neo_assets.sources.rules.envelope_reuse import envelope_rules, recorded_envelope_holds

RULES = envelope_rules(["vendor/**"], 1_000_000)


def holds(**changes: object) -> bool:
    args: dict[str, object] = {
        "recorded_revision": "c1",
        "recorded_rules": RULES,
        "recorded_skip_reasons": [None, codes.SKIP_BINARY, codes.SKIP_EXCLUDED],
        "revision": "c1",
        "rules": RULES,
    }
    args.update(changes)
    return recorded_envelope_holds(**args)  # type: ignore[arg-type]


def test_same_commit_same_rules_holds() -> None:
    assert holds()


@pytest.mark.parametrize(
    "changes",
    [
        {"revision": "c2"},
        {"rules": envelope_rules(["vendor/**", "*.min.js"], 1_000_000)},
        {"rules": envelope_rules(["vendor/**"], 2_000_000)},
        {"recorded_rules": ""},  # recorded before the rules were
        {"recorded_skip_reasons": [None, codes.SKIP_UNREADABLE]},
    ],
    ids=["new commit", "new glob", "new cap", "no recorded rules", "an unreadable path"],
)
def test_anything_else_lists_the_tree_afresh(changes: dict[str, object]) -> None:
    assert not holds(**changes)


def test_the_rules_digest_names_globs_cap_and_version() -> None:
    assert envelope_rules(["a"], 10) == envelope_rules(["a"], 10)
    assert len({envelope_rules(["a"], 10), envelope_rules(["b"], 10), envelope_rules([], 10)}) == 3
    assert envelope_rules(["a"], 10) != envelope_rules(["a"], 11)


def test_envelope_delta_is_what_changed_and_what_it_replaces_or_drops() -> None:
    from typing import NamedTuple

    from neo_assets.sources.rules.envelope_reuse import envelope_delta

    class E(NamedTuple):
        path: str
        blob: str
        detail: str = ""  # not kept by the ledger: no reason to rewrite

    def key(e: E) -> tuple:
        return (e.path, e.blob)

    recorded = [E(f"p{i}", "a") for i in range(10)]
    entries = [E("p0", "b"), *recorded[1:5], E("p5", "a", "detail"), *recorded[6:9], E("q", "c")]
    changed, replacing = envelope_delta(recorded, entries, key)
    assert changed == [E("p0", "b"), E("q", "c")]
    assert replacing == ["p0", "p9"]  # p0 rewritten, p9 gone; q is new
    assert envelope_delta(recorded, recorded, key) == ([], [])
    # Most of it changed: recorded whole instead.
    assert envelope_delta(recorded, [E(e.path, "z") for e in recorded], key) is None
    assert envelope_delta([], entries, key) is None
