from neo_assets.quality.gate import (
    OFF,
    OVERRIDDEN,
    PASSED,
    PENDING,
    REFUSED,
    QualityScore,
    evaluations_due,
    gate,
    held_switches,
    label_generation,
    parser_gate,
    parser_label,
)


def score(repo: str, gen: str, mrr: float, r10: float, *, n: int = 40, qs: str = "q1"):
    return QualityScore(repo, gen, n, mrr / 2, r10 - 0.1, r10, mrr, question_set=qs)


def test_a_generation_not_worse_on_any_repo_passes() -> None:
    scores = {
        ("w", "new"): score("w", "new", 0.30, 0.50),
        ("w", "old"): score("w", "old", 0.32, 0.52),  # 0.02 worse: within the margin
        ("g", "new"): score("g", "new", 0.40, 0.70),
        ("g", "old"): score("g", "old", 0.20, 0.40),
    }
    v = gate("new", "old", ["w", "g"], scores, 0.05)
    assert (v.state, v.allowed, v.worse, v.waiting) == (PASSED, True, (), ())


def test_one_repo_worse_past_the_margin_refuses_and_names_it_and_the_fix() -> None:
    scores = {
        ("w", "new"): score("w", "new", 0.30, 0.50),
        ("w", "old"): score("w", "old", 0.30, 0.60),  # recall@10 0.10 worse
        ("g", "new"): score("g", "new", 0.40, 0.70),
        ("g", "old"): score("g", "old", 0.20, 0.40),
    }
    v = gate("new", "old", ["w", "g"], scores, 0.05)
    assert (v.state, v.allowed, v.worse) == (REFUSED, False, ("w",))
    assert "recall@10 0.600 -> 0.500" in v.reason and "old keeps serving" in v.reason
    assert "neo-assets quality allow <tenant> new" in v.reason


def test_an_mrr_drop_alone_refuses() -> None:
    scores = {("w", "new"): score("w", "new", 0.10, 0.6), ("w", "old"): score("w", "old", 0.3, 0.6)}
    assert gate("new", "old", ["w"], scores, 0.05).state == REFUSED


def test_waits_until_both_are_evaluated_on_the_same_questions() -> None:
    only_new = {("w", "new"): score("w", "new", 0.3, 0.5)}
    v = gate("new", "old", ["w"], only_new, 0.05)
    assert (v.state, v.allowed, v.waiting) == (PENDING, False, ("w",))
    other_questions = only_new | {("w", "old"): score("w", "old", 0.3, 0.5, qs="q0")}
    assert gate("new", "old", ["w"], other_questions, 0.05).state == PENDING


def test_a_repo_without_questions_is_no_evidence_either_way() -> None:
    scores = {
        ("w", "new"): score("w", "new", 0.0, 0.0, n=0),
        ("w", "old"): score("w", "old", 0.9, 0.9, n=0),
    }
    assert gate("new", "old", ["w"], scores, 0.05).state == PASSED


def test_an_operators_decision_lets_a_refused_or_pending_generation_serve() -> None:
    worse = {("w", "new"): score("w", "new", 0.1, 0.2), ("w", "old"): score("w", "old", 0.5, 0.8)}
    v = gate("new", "old", ["w"], worse, 0.05, overridden=True)
    assert (v.state, v.allowed, v.worse) == (OVERRIDDEN, True, ("w",))
    assert gate("new", "old", ["w"], {}, 0.05, overridden=True).state == OVERRIDDEN
    # a decision on a generation that passes anyway changes nothing
    fine = {("w", "new"): score("w", "new", 0.5, 0.8), ("w", "old"): score("w", "old", 0.5, 0.8)}
    assert gate("new", "old", ["w"], fine, 0.05, overridden=True).state == PASSED


def test_the_gate_off_lets_every_switch_through() -> None:
    v = gate("new", "old", ["w"], {}, 0.05, enabled=False)
    assert (v.state, v.allowed) == (OFF, True)


NEW, OLD = ("neo-code", "2.0.0"), ("neo-code", "1.0.0")


def test_a_parser_switch_is_held_only_where_a_recorded_parser_differs() -> None:
    recorded = {"w": OLD, "g": NEW}
    declared = {"w": NEW, "g": NEW, "fresh": NEW}
    assert held_switches(recorded, declared) == {"w": (NEW, OLD)}


def test_a_parser_switch_is_judged_on_its_own_labels_at_the_serving_generation() -> None:
    new_l, old_l = parser_label("gen", NEW), parser_label("gen", OLD)
    assert label_generation(new_l) == "gen" and label_generation("gen") == "gen"
    scores = {
        ("w", new_l): score("w", new_l, 0.20, 0.40),
        ("w", old_l): score("w", old_l, 0.30, 0.50),
        ("w", parser_label("other-gen", NEW)): score("w", "x", 0.90, 0.90),  # not this one
    }
    v = parser_gate("acme", "w", NEW, OLD, "gen", scores, 0.05)
    assert (v.state, v.candidate, v.serving, v.worse) == (
        REFUSED,
        "neo-code@2.0.0",
        "neo-code@1.0.0",
        ("w",),
    )
    assert v.reason.startswith("parser neo-code@2.0.0 answers worse than neo-code@1.0.0")
    assert "`neo-assets quality allow acme parser:neo-code@2.0.0 --reason" in v.reason
    pending = parser_gate("acme", "w", NEW, OLD, "other-gen", scores, 0.05)
    assert pending.state == PENDING and pending.waiting == ("w",)
    allowed = parser_gate("acme", "w", NEW, OLD, "gen", scores, 0.05, overridden=True)
    assert allowed.state == OVERRIDDEN and allowed.allowed


def test_a_held_parser_switch_makes_both_sides_due_and_only_the_candidate_released() -> None:
    due = evaluations_due(["w"], {"w": "r1"}, "gen", None, {}, {"w": (NEW, OLD)})
    got = {(d.generation, d.release) for d in due}
    assert got == {
        ("gen", False),
        (parser_label("gen", NEW), True),
        (parser_label("gen", OLD), False),
    }
    done = {(s, g): score(s, g, 0.3, 0.5) for s, g in [("w", d.generation) for d in due]}
    done = {k: QualityScore(**{**v.__dict__, "revision": "r1"}) for k, v in done.items()}
    assert evaluations_due(["w"], {"w": "r1"}, "gen", None, done, {"w": (NEW, OLD)}) == []
