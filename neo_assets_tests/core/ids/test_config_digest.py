"""Declaration digests (stable across key order, changed by any field) and the
configVersion rule (starts at 1, +1 on every change, a revert is a change)."""

import copy
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neo_assets.core.ids.config_digest import (
    canonical_json,
    declaration_digest,
    is_declaration_digest,
    next_config_version,
    repo_declaration_digest,
)


def repo_plain() -> dict[str, Any]:
    return {
        "slug": "widgets",
        "path": "/srv/repos/widgets",
        "ref": None,
        "parser": {"id": "neo-code", "version": "1.0.0", "exclude": ["vendor/**"]},
        "cadence_minutes": 30,
    }


def tenant_plain() -> dict[str, Any]:
    other = repo_plain()
    other["slug"] = "docs"
    return {"id": "acme", "repos": [other, repo_plain()]}


def reverse_keys(value: Any) -> Any:
    """The same data with every dict's insertion order reversed."""
    if isinstance(value, dict):
        return {key: reverse_keys(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reverse_keys(item) for item in value]
    return value


# --------------------------------------------------------------------------- digests


def test_digests_are_sha256_hex() -> None:
    for digest in (declaration_digest(tenant_plain()), repo_declaration_digest(repo_plain())):
        assert is_declaration_digest(digest)
        assert len(digest) == 64


def test_stable_across_key_order() -> None:
    tenant = tenant_plain()
    reordered = reverse_keys(tenant)
    assert list(reordered) != list(tenant)
    assert list(reordered["repos"][0]["parser"]) != list(tenant["repos"][0]["parser"])
    assert declaration_digest(reordered) == declaration_digest(tenant)
    assert repo_declaration_digest(reverse_keys(repo_plain())) == repo_declaration_digest(
        repo_plain()
    )


def test_golden_value_pins_the_encoding() -> None:
    # If this changes, every tenant's configVersion bumps on the next load: do it on purpose.
    # = sha256sum of the bytes ["neo-tenant-declaration/1",{"id":"acme","repos":[]}]
    assert declaration_digest({"id": "acme", "repos": []}) == (
        "0da5df78266630ecfe3df2de6b3305ac3053e2cd8283f1796fcbead9e622f6f0"
    )


def test_tenant_and_repo_digests_are_domain_separated() -> None:
    assert declaration_digest(repo_plain()) != repo_declaration_digest(repo_plain())


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(plain: dict[str, Any]) -> None:
        target: Any = plain
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return mutate


REPO_MUTATIONS = {
    "slug": _set(("slug",), "gadgets"),
    "path": _set(("path",), "/srv/repos/widgets2"),
    "ref-given": _set(("ref",), "main"),
    "parser-id": _set(("parser", "id"), "other-parser"),
    "parser-version": _set(("parser", "version"), "1.0.1"),
    "exclude-added": _set(("parser", "exclude"), ["vendor/**", "*.min.js"]),
    "exclude-removed": _set(("parser", "exclude"), []),
    "cadence": _set(("cadence_minutes",), 31),
    "cadence-cleared": _set(("cadence_minutes",), None),
    "type-only": _set(("cadence_minutes",), "30"),
    "new-key": _set(("extra",), None),
}


@pytest.mark.parametrize("mutate", REPO_MUTATIONS.values(), ids=REPO_MUTATIONS.keys())
def test_any_repo_field_change_changes_both_digests(
    mutate: Callable[[dict[str, Any]], None],
) -> None:
    repo = repo_plain()
    changed = copy.deepcopy(repo)
    mutate(changed)
    assert changed != repo
    assert repo_declaration_digest(changed) != repo_declaration_digest(repo)

    tenant = tenant_plain()
    changed_tenant = copy.deepcopy(tenant)
    mutate(changed_tenant["repos"][1])
    assert declaration_digest(changed_tenant) != declaration_digest(tenant)


def test_tenant_id_and_repo_set_change_the_tenant_digest() -> None:
    tenant = tenant_plain()
    renamed = copy.deepcopy(tenant)
    renamed["id"] = "acme-2"
    fewer = copy.deepcopy(tenant)
    fewer["repos"].pop()
    digests = {declaration_digest(t) for t in (tenant, renamed, fewer)}
    assert len(digests) == 3


def test_non_json_data_is_refused_not_coerced() -> None:
    with pytest.raises(TypeError):
        declaration_digest({"id": "acme", "path": Path("/x")})
    with pytest.raises(ValueError):
        declaration_digest({"id": "acme", "cadence_minutes": math.nan})
    with pytest.raises(TypeError):
        repo_declaration_digest(["not", "a", "mapping"])  # type: ignore[arg-type]


def test_canonical_json_is_compact_sorted_and_unicode() -> None:
    assert canonical_json({"b": 1, "a": ["é", None]}) == '{"a":["é",null],"b":1}'


# --------------------------------------------------------------------------- configVersion

A = declaration_digest({"id": "acme", "repos": [], "n": 1})
B = declaration_digest({"id": "acme", "repos": [], "n": 2})
C = declaration_digest({"id": "acme", "repos": [], "n": 3})


def test_first_declaration_is_version_1() -> None:
    assert next_config_version({}, A) == 1


def test_unchanged_declaration_keeps_its_version() -> None:
    assert next_config_version({A: 1}, A) == 1
    assert next_config_version({A: 1, B: 2}, B) == 2


def test_changed_declaration_gets_the_next_version() -> None:
    assert next_config_version({A: 1}, B) == 2
    assert next_config_version({A: 1, B: 2}, C) == 3


def test_going_back_to_an_earlier_declaration_is_a_change() -> None:
    assert next_config_version({A: 1, B: 2}, A) == 3
    # The caller records A -> 3; A is now current and stays at 3.
    assert next_config_version({A: 3, B: 2}, A) == 3
    assert next_config_version({A: 3, B: 2}, B) == 4


@pytest.mark.parametrize(
    ("known", "digest"),
    [
        ({A: 1, B: 1}, C),  # two digests on one version
        ({A: 0}, A),
        ({A: -1}, B),
        ({A: True}, A),  # a bool is not a version
        ({A: 1.0}, A),
        ({"not-a-digest": 1}, A),
        ({A: 1}, "A" * 64),  # uppercase hex is not what the digests produce
        ({A: 1}, A + "\n"),
        ({}, ""),
    ],
)
def test_corrupt_inputs_are_refused(known: dict[str, Any], digest: str) -> None:
    with pytest.raises(ValueError):
        next_config_version(known, digest)


@given(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=30))
def test_version_increases_by_one_exactly_when_the_declaration_changes(
    declarations: list[int],
) -> None:
    """Simulate a ledger over a sequence of loads: the version moves iff the declaration
    differs from the previous load, by exactly one, and never goes back."""
    known: dict[str, int] = {}
    previous_declaration: int | None = None
    previous_version = 0
    for declaration in declarations:
        digest = declaration_digest({"id": "acme", "repos": [], "n": declaration})
        version = next_config_version(known, digest)
        if declaration == previous_declaration:
            assert version == previous_version
        else:
            assert version == previous_version + 1
        known[digest] = version
        previous_declaration, previous_version = declaration, version
    assert previous_version == 1 + sum(
        1 for before, after in zip(declarations, declarations[1:], strict=False) if before != after
    )
