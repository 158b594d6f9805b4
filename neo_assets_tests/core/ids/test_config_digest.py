"""Declaration digests (stable across key order, changed by any field). The configVersion
rule (starts at 1, +1 on every change, a revert is a change) is the ledger's:
store/test_ledger.py."""

import copy
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from neo_assets.core.ids.config_digest import (
    canonical_json,
    declaration_digest,
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
        assert re.fullmatch("[0-9a-f]{64}", digest)
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
