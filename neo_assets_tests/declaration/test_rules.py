"""The declaration in force when part of the tenants file cannot be used: plain data."""

from neo_assets.declaration.rules import (
    SOURCE_FILE,
    SOURCE_LAST_GOOD,
    STANDS_LAST_GOOD,
    STANDS_NOTHING,
    TenantBlock,
    declaration_verdict,
    in_force,
)


def repo(slug: str, version: str = "1.0.0", path: str = "/r") -> dict:
    return {
        "slug": slug,
        "path": f"{path}/{slug}",
        "ref": None,
        "parser": {"id": "neo-code", "version": version, "exclude": []},
        "cadence_minutes": None,
    }


def tenant(tid: str, *repos: dict) -> dict:
    return {"id": tid, "repos": list(repos)}


def by_id(decl) -> dict:
    return {t["id"]: {r["slug"]: r for r in t["repos"]} for t in decl.tenants}


def test_a_good_file_is_in_force_and_every_tenant_is_good() -> None:
    blocks = [TenantBlock("acme", repos={"w": repo("w")}), TenantBlock("globex")]
    decl = in_force(blocks, {})
    assert by_id(decl) == {"acme": {"w": repo("w")}, "globex": {}}
    assert decl.good == ("acme", "globex") and decl.source == SOURCE_FILE
    assert decl.misdeclared == () and decl.withheld == () and not decl.retires_nothing


def test_a_misdeclared_repo_keeps_its_last_good_declaration_and_its_siblings_go_on() -> None:
    last = {"acme": tenant("acme", repo("w", "1.0.0"), repo("g"))}
    block = TenantBlock(
        "acme",
        repos={"g": repo("g", "2.0.0"), "new": repo("new")},
        repo_problems={"w": ("bad version",)},
    )
    decl = in_force([block], last)
    repos = by_id(decl)["acme"]
    assert repos["w"] == repo("w", "1.0.0")  # the last good one
    assert repos["g"] == repo("g", "2.0.0")  # the file's own, changed: applied
    assert "new" in repos
    (m,) = decl.misdeclared
    assert (m.tenant_id, m.repo_slug, m.stands, m.problems) == (
        "acme",
        "w",
        STANDS_LAST_GOOD,
        ("bad version",),
    )
    assert decl.good == () and decl.withheld == ()  # not recorded as good


def test_a_misdeclared_repo_never_good_is_withheld_not_dropped() -> None:
    decl = in_force([TenantBlock("acme", repo_problems={"w": ("missing path",)})], {})
    assert by_id(decl) == {"acme": {}}
    assert decl.withheld == (("acme", "w"),)
    assert decl.misdeclared[0].stands == STANDS_NOTHING


def test_a_tenant_level_problem_holds_the_whole_last_good_tenant() -> None:
    last = {"acme": tenant("acme", repo("w"))}
    decl = in_force([TenantBlock("acme", problems=("unknown key",)), TenantBlock("globex")], last)
    assert by_id(decl) == {"acme": {"w": repo("w")}, "globex": {}}
    assert decl.good == ("globex",)
    decl = in_force([TenantBlock("acme", problems=("unknown key",))], {})
    assert decl.tenants == () and decl.withheld == (("acme", None),)


def test_an_entry_naming_no_repo_holds_every_last_good_repo_the_file_stopped_naming() -> None:
    last = {"acme": tenant("acme", repo("w"), repo("g"))}
    block = TenantBlock("acme", repos={"g": repo("g")}, unnamed_repo_problems=("bad slug",))
    decl = in_force([block], last)
    assert set(by_id(decl)["acme"]) == {"w", "g"}
    assert ("acme", None) in decl.withheld  # every repo of it counts as declared


def test_a_block_naming_no_tenant_holds_every_tenant_the_file_stopped_naming() -> None:
    last = {"acme": tenant("acme", repo("w")), "globex": tenant("globex", repo("t"))}
    decl = in_force(
        [TenantBlock("globex", repos={"t": repo("t")}), TenantBlock(None, ("id",))], last
    )
    assert set(by_id(decl)) == {"acme", "globex"}
    assert decl.retires_nothing
    assert decl.misdeclared[0].tenant_id is None
    # The tenant the file stopped naming is the likely one: misdeclared by that entry.
    held = [m for m in decl.misdeclared if m.tenant_id == "acme"]
    assert [(m.repo_slug, m.problems, m.stands) for m in held] == [
        (None, ("id",), STANDS_LAST_GOOD)
    ]
    assert not [m for m in decl.misdeclared if m.tenant_id == "globex"]


def test_a_file_that_gives_no_tenant_keeps_every_last_good_declaration() -> None:
    last = {"globex": tenant("globex", repo("t")), "acme": tenant("acme", repo("w"))}
    decl = in_force([], last, file_problems=("invalid YAML",), file_readable=False)
    assert [t["id"] for t in decl.tenants] == ["acme", "globex"]
    assert decl.source == SOURCE_LAST_GOOD and decl.retires_nothing
    assert decl.file_problems == ("invalid YAML",) and decl.good == ()
    assert in_force([], {}, file_problems=("x",), file_readable=False).tenants == ()


def _doc(tenant, repo, line, stands, message="bad") -> dict:
    return {
        "tenantId": tenant,
        "repoSlug": repo,
        "line": line,
        "message": message,
        "inForce": stands,
    }


def test_the_check_passes_when_nothing_is_misdeclared() -> None:
    verdict = declaration_verdict("/t.yaml", [], scope="acme")
    assert verdict.passed and verdict.offending == ()


def test_the_check_warns_while_a_last_good_declaration_stands_in() -> None:
    entry = _doc("acme", "gadgets", 11, STANDS_LAST_GOOD, "repo directory does not exist")
    verdict = declaration_verdict("/t.yaml", [entry], scope="acme")
    assert not verdict.passed and not verdict.error
    assert verdict.offending == ("acme/gadgets line 11",)
    assert "repo directory does not exist" in verdict.summary
    assert "last good declaration stays in force" in verdict.summary
    assert "Fix: edit /t.yaml" in verdict.summary


def test_the_check_errs_when_an_entry_stands_on_nothing() -> None:
    verdict = declaration_verdict("/t.yaml", [_doc("acme", "new", 3, STANDS_NOTHING)])
    assert not verdict.passed and verdict.error
    assert "not swept or served" in verdict.summary


def test_the_check_warns_for_a_file_that_cannot_be_read() -> None:
    verdict = declaration_verdict(
        "/t.yaml",
        [],
        source=SOURCE_LAST_GOOD,
        file_problems=[{"line": 2, "message": "invalid YAML"}],
    )
    assert not verdict.passed and not verdict.error
    assert "cannot be used" in verdict.summary and "line 2" in verdict.summary
