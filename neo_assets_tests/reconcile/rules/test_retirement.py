"""Retirement over plain data: what is retired, and how containment reports it (WARN kinds
on the retired scope's own tenant, never a breach, never on another tenant)."""

from typing import Any

from neo_assets.reconcile.rules.checks import (
    CONTAINMENT_UNDECLARED_TENANT,
    CONTAINMENT_UNOWNED_REPO,
    containment,
)
from neo_assets.reconcile.rules.retirement import (
    RETIRED_REPO,
    RETIRED_TENANT,
    Retired,
    retired,
    scope_label,
)


def md(tenant: Any = "acme", repo: Any = "widgets", path: Any = "a.py") -> dict:
    return {"tenantId": tenant, "repoSlug": repo, "sourcePath": path}


DECLARED = {"acme": {"widgets"}, "initech": set()}
KNOWN_TENANTS = ["acme", "globex", "initech"]
KNOWN_REPOS = [("acme", "widgets"), ("acme", "old"), ("globex", "tools"), ("umbrella", "x")]


def test_retired_is_what_the_ledger_knew_and_the_file_no_longer_declares() -> None:
    found = retired(DECLARED, KNOWN_TENANTS, KNOWN_REPOS)
    # globex: config versions recorded; umbrella: only a repo state (still the ledger's).
    assert found.tenants == {"globex", "umbrella"}
    # A retired tenant's repos are the tenant's, not listed again.
    assert found.repos == {("acme", "old")}
    assert found.kind("globex", "tools") == RETIRED_TENANT
    assert found.kind("acme", "old") == RETIRED_REPO
    assert found.kind("acme", "widgets") is None  # declared: live
    assert found.kind("acme", "never") is None  # the ledger never knew it
    assert found.repos_of("acme") == ("old",)


def test_redeclaring_makes_it_live_again() -> None:
    again = retired(
        {"acme": {"widgets", "old"}, "globex": {"tools"}, "umbrella": {"x"}, "initech": set()},
        KNOWN_TENANTS,
        KNOWN_REPOS,
    )
    assert again == Retired()


ROWS = [
    {"id": "live", "metadata": md()},
    {"id": "old-1", "metadata": md("acme", "old", "x.py")},
    {"id": "old-2", "metadata": md("acme", "old", "y.py")},
    {"id": "globex-1", "metadata": md("globex", "tools", "t.py")},
    {"id": "intruder", "metadata": md("intruder", "tools", "i.py")},
    {"id": "cross", "metadata": md("acme", "never", "c.py")},
]


def test_containment_reports_retired_rows_apart_on_their_own_tenant_only() -> None:
    found = retired(DECLARED, KNOWN_TENANTS, KNOWN_REPOS)
    on_acme = containment(ROWS, DECLARED, retired=found, focus="acme")
    # The rows the ledger never knew stay breaches, named by id and by path.
    assert on_acme.violations[CONTAINMENT_UNDECLARED_TENANT] == 1
    assert on_acme.violations[CONTAINMENT_UNOWNED_REPO] == 1
    assert on_acme.example_paths[CONTAINMENT_UNOWNED_REPO] == ("never:c.py",)
    # acme's retired repo is reported on acme, globex's rows are not acme's business.
    assert on_acme.retired == {RETIRED_REPO: 2, RETIRED_TENANT: 0}
    assert on_acme.retired_by_scope == {scope_label("acme", "old"): 2}
    assert on_acme.retired_paths[RETIRED_REPO] == ("old:x.py", "old:y.py")
    assert on_acme.others_retired == 1

    on_globex = containment(ROWS, DECLARED, retired=found, focus="globex")
    assert on_globex.retired == {RETIRED_REPO: 0, RETIRED_TENANT: 1}
    assert on_globex.retired_by_scope == {"globex": 1}
    assert on_globex.others_retired == 2

    # Without retirement known, the same rows are the breaches they used to be.
    blind = containment(ROWS, DECLARED, focus="acme")
    assert blind.violations[CONTAINMENT_UNOWNED_REPO] == 3
    assert blind.violations[CONTAINMENT_UNDECLARED_TENANT] == 2
    assert blind.retired_rows == 0


def test_a_tenant_with_no_retired_rows_has_a_clean_check() -> None:
    found = retired(DECLARED, KNOWN_TENANTS, KNOWN_REPOS)
    judged = containment(ROWS[:1] + ROWS[3:4], DECLARED, retired=found, focus="acme")
    assert judged.violating_rows == 0 and judged.retired_rows == 0
    assert judged.others_retired == 1
