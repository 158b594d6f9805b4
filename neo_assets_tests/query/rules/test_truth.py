"""query/rules/truth.py over plain data: one set per path, judged like the no-hole check."""

from neo_assets.query.rules.truth import (
    SERVED_DECLARED,
    SERVED_NOTHING,
    SERVED_PREVIOUS,
    RowStamp,
    previous_set,
    repo_serving,
    tenant_serving,
)
from neo_assets.reconcile.rules.checks import path_wholeness
from neo_assets.reconcile.rules.declaration import RepoDeclaration, TenantDeclaration

GEN = "gen-1"


def stamp(rid, path="a.py", name="f", rev="r1", version="1.0.0", at=1.0, kind="function"):
    return RowStamp(rid, "w", path, kind, name, "neo-code", version, rev, at)


def row(s: RowStamp, tenant="acme", generation=GEN):
    return {
        "id": s.id,
        "metadata": {
            "tenantId": tenant,
            "repoSlug": s.repo_slug,
            "sourcePath": s.source_path,
            "kind": s.kind,
            "name": s.name,
            "parserId": s.parser_id,
            "parserVersion": s.parser_version,
            "revision": s.revision,
            "ingestedAt": s.ingested_at,
            "embeddingGeneration": generation,
        },
    }


def decl(declared, version="1.0.0", yielded=None, authority=True):
    paths = set(yielded if yielded is not None else declared)
    return RepoDeclaration(
        repo_slug="w",
        parser_id="neo-code",
        parser_version=version,
        envelope_paths=frozenset(paths),
        yielded_paths=frozenset(paths),
        envelope_recorded_at=0.0,
        declared_ids_by_path={p: frozenset(ids) for p, ids in declared.items()}
        if authority
        else {},
        has_complete_envelope=authority,
    )


def serve(repo, stamps, fenced=frozenset(), rev="r2"):
    present = frozenset(s.id for s in stamps)
    return repo_serving(repo, stamps, present, fenced, generation_revision=rev)


def test_complete_path_serves_exactly_its_declared_ids_and_agrees_with_no_hole():
    old_a, old_b = stamp("A", name="a"), stamp("B", name="b")
    new_b = stamp("B2", name="b", rev="r2", at=2.0)
    repo = decl({"a.py": {"A", "B2"}})
    got = serve(repo, [old_a, old_b, new_b])
    assert got.ids == {"A", "B2"} and got.paths == {"a.py": SERVED_DECLARED}
    judged = path_wholeness(repo, {"a.py": {"A", "B", "B2"}}, {"A", "B", "B2"}, set(), settled=True)
    assert judged.complete == 1


def test_incomplete_edit_serves_the_whole_previous_set_never_the_new_row():
    old_a, old_b = stamp("A", name="a"), stamp("B", name="b")
    repo = decl({"a.py": {"A", "B2"}})  # B2 not written yet
    got = serve(repo, [old_a, old_b])
    assert got.ids == {"A", "B"} and got.paths == {"a.py": SERVED_PREVIOUS}
    judged = path_wholeness(repo, {"a.py": {"A", "B"}}, {"A", "B"}, set(), settled=False)
    assert judged.held == ("w:a.py",)


def test_incomplete_generation_own_rows_are_left_out_of_the_previous_set():
    old_a, old_b = stamp("A", name="a"), stamp("B", name="b")
    new_a = stamp("A2", name="a", rev="r2", at=2.0)
    repo = decl({"a.py": {"A2", "B2"}})  # A2 written, B2 not
    assert serve(repo, [old_a, old_b, new_a]).ids == {"A", "B"}


def test_several_superseded_generations_serve_only_the_newest():
    # r1 {A, B}; r2 edited b -> {A, B'} (complete then); r3 edits a, in flight.
    a1, b1 = stamp("A", name="a", rev="r1", at=1.0), stamp("B", name="b", rev="r1", at=1.0)
    b2 = stamp("B'", name="b", rev="r2", at=2.0)
    repo = decl({"a.py": {"A3", "B'"}})
    assert serve(repo, [a1, b1, b2], rev="r3").ids == {"A", "B'"}


def test_parser_bump_previous_set_is_one_parser_identity():
    old = [stamp("A", version="1.0.0", at=1.0), stamp("X", name="x", version="0.9.0", at=0.5)]
    repo = decl({"a.py": {"N1"}}, version="2.0.0")
    assert previous_set(old, frozenset()) == {"A"}
    assert serve(repo, old, rev="r1").ids == {"A"}


def test_fenced_ids_count_as_present_and_empty_paths_serve_nothing():
    repo = decl({"a.py": {"A", "F"}, "empty.md": set()})
    got = serve(repo, [stamp("A")], fenced=frozenset({"F"}))
    assert got.ids == {"A"}
    assert got.paths == {"a.py": SERVED_DECLARED, "empty.md": SERVED_DECLARED}


def test_a_departed_path_serves_its_previous_set_while_the_new_path_is_in_flight():
    # A rename (deleted.py -> new.py) with new.py not embedded yet: the old rows still
    # answer, so the content is never absent (the moves gate reconciliation uses too).
    repo = decl({"new.py": {"N"}}, yielded={"new.py"})
    gone = stamp("G", path="deleted.py")
    got = serve(repo, [gone])
    assert got.ids == {"G"}
    assert got.paths == {"new.py": SERVED_NOTHING, "deleted.py": SERVED_PREVIOUS}


def test_a_departed_path_serves_nothing_once_the_generation_is_complete():
    repo = decl({"new.py": {"N"}}, yielded={"new.py"})
    rows = [stamp("G", path="deleted.py"), stamp("N", path="new.py")]
    got = serve(repo, rows)
    assert got.ids == {"N"} and got.paths == {"new.py": SERVED_DECLARED}


def test_repo_without_authority_serves_the_newest_set_of_each_path():
    repo = decl({}, authority=False)
    rows = [stamp("A", rev="r1", at=1.0), stamp("A2", rev="r2", at=2.0)]
    assert serve(repo, rows).ids == {"A2"}


def test_tenant_serving_drops_other_tenants_generations_and_undeclared_repos():
    a = stamp("A")
    declaration = TenantDeclaration("acme", 1, {"w": decl({"a.py": {"A"}})})
    rows = [
        row(a),
        row(stamp("B"), tenant="globex"),
        row(stamp("C"), generation="gen-0"),
        {**row(stamp("D")), "metadata": {**row(stamp("D"))["metadata"], "repoSlug": "retired"}},
    ]
    served = tenant_serving(
        declaration, rows, frozenset(), embedding_generation=GEN, generation_revisions={"w": "r1"}
    )
    assert set(served) == {"w"} and served["w"].ids == {"A"}


def held(repo: RepoDeclaration, identity=("neo-code", "1.0.0")) -> RepoDeclaration:
    from dataclasses import replace

    return replace(repo, held_parser=identity)


def test_a_held_parser_switch_serves_the_old_parsers_rows_even_where_the_new_are_complete():
    old = [stamp("A", name="a", version="1.0.0", at=1.0), stamp("B", name="b", at=1.0)]
    new = [stamp("N1", name="a", version="2.0.0", rev="r2", at=2.0)]
    repo = decl({"a.py": {"N1"}}, version="2.0.0")
    assert serve(repo, old + new).ids == {"N1"}  # not held: complete, the new serve
    got = serve(held(repo), old + new)
    assert got.ids == {"A", "B"} and got.paths == {"a.py": SERVED_PREVIOUS}


def test_a_held_switch_keeps_the_old_parser_after_later_sweeps_of_the_new_one():
    # The new parser's unchanged rows keep their older revision: without the hold the
    # previous set would be theirs (the newest identity), not the serving parser's.
    old = [stamp("A", name="a", version="1.0.0", rev="r1", at=1.0)]
    new = [stamp("N1", name="a", version="2.0.0", rev="r2", at=2.0)]
    repo = decl({"a.py": {"N1", "N2"}}, version="2.0.0")  # r3 declares one more, in flight
    assert serve(repo, old + new, rev="r3").ids == {"N1"}
    assert serve(held(repo), old + new, rev="r3").ids == {"A"}


def test_a_path_only_the_new_parser_has_serves_its_rows_under_a_hold():
    old = [stamp("A", path="a.py", version="1.0.0")]
    new = [
        stamp("N1", path="a.py", version="2.0.0", rev="r2", at=2.0),
        stamp("N2", path="b.py", version="2.0.0", rev="r2", at=2.0),
    ]
    repo = decl({"a.py": {"N1"}, "b.py": {"N2"}}, version="2.0.0")
    got = serve(held(repo), old + new)
    assert got.ids == {"A", "N2"}
    assert got.paths == {"a.py": SERVED_PREVIOUS, "b.py": SERVED_DECLARED}


def test_a_held_switch_serves_no_row_of_a_path_the_declaration_excludes():
    old = [stamp("A", path="a.py"), stamp("V", path="vendor/v.py")]
    new = [stamp("N1", path="a.py", version="2.0.0", rev="r2", at=2.0)]
    repo = decl({"a.py": {"N1"}}, version="2.0.0")  # vendor/ excluded with the bump
    assert serve(held(repo), old + new).ids == {"A"}
