"""The self-evaluation rules over plain data: subjects, diffs, units, the question set
and the figures."""

import pytest

from neo_assets.quality.rules import (
    Commit,
    Metrics,
    Question,
    Unit,
    changed_lines,
    clean_subject,
    dropped,
    is_test_or_doc,
    metrics,
    question_set,
    rank_of,
    touched,
    vague_reason,
)


@pytest.mark.parametrize(
    ("subject", "reason"),
    [
        ("fix typo", "typo"),
        ("Fix typos in docstring of send_file", "typo"),
        ("update", "update"),
        ("Update", "update"),
        ("update deps", "housekeeping"),
        ("Merge branch 'stable'", "merge"),
        ("Merge pull request #12 from x/y", "merge"),
        ("Bump version to 2.3.1", "version"),
        ("release 3.0.0", "version"),
        ("v1.2.3", "version"),
        ("add release notes for the new parser", "release-notes"),
        ("Update CHANGELOG", "release-notes"),
        ('Revert "add cache"', "revert"),
        ("run ruff format over the package", "housekeeping"),
        ("Fix flaky test", "tests"),
        ("fix: it", "short"),
        ("", "empty"),
    ],
)
def test_a_vague_subject_is_named(subject: str, reason: str) -> None:
    assert vague_reason(subject) == reason


@pytest.mark.parametrize(
    "subject",
    [
        "prevent completions from mutating os.Args via append side effect",
        "fix(hooks): retry when the server answers 429 with Retry-After",
        "Don't throw `HTTPError` for opaque responses from `no-cors` requests (#812)",
    ],
)
def test_a_specific_subject_is_a_question(subject: str) -> None:
    assert vague_reason(subject) is None


def test_clean_subject_drops_prefix_and_pr_reference() -> None:
    assert clean_subject("fix(hooks): retry on 429 with Retry-After (#874).") == (
        "retry on 429 with Retry-After"
    )
    assert clean_subject("Add unique args validator") == "Add unique args validator"


def test_tests_and_docs_are_no_source() -> None:
    assert is_test_or_doc("tests/test_app.py")
    assert is_test_or_doc("src/foo_test.go")
    assert is_test_or_doc("source/core.test.ts")
    assert is_test_or_doc("docs/conf.py")
    assert not is_test_or_doc("src/flask/app.py")
    assert not is_test_or_doc("command.go")


DIFF = """diff --git a/pkg/a.py b/pkg/a.py
--- a/pkg/a.py
+++ b/pkg/a.py
@@ -3,0 +4,2 @@ def f():
+    x = 1
+    y = 2
@@ -10 +12 @@ def g():
-    return 1
+    return 2
@@ -20,2 +21,0 @@ def h():
-    a
-    b
diff --git a/gone.py b/gone.py
--- a/gone.py
+++ /dev/null
@@ -1,3 +0,0 @@
-x
"""


def test_changed_lines_reads_the_new_side() -> None:
    assert changed_lines(DIFF) == {"pkg/a.py": [(4, 5), (12, 12), (21, 21)]}


def unit(name: str, start: int, end: int, path: str = "a.py") -> Unit:
    return Unit(path, name, "function", start, end, f"def {name}():")


def test_touched_takes_the_innermost_unit() -> None:
    outer, inner, other = unit("outer", 1, 20), unit("outer.inner", 5, 8), unit("g", 30, 40)
    assert touched([outer, inner, other], [(6, 6)]) == {("a.py", "outer.inner")}
    assert touched([outer, inner, other], [(12, 12)]) == {("a.py", "outer")}
    assert touched([outer, inner, other], [(6, 6), (35, 36)]) == {
        ("a.py", "outer.inner"),
        ("a.py", "g"),
    }
    assert touched([outer], [(50, 51)]) == set()


def test_question_set_keeps_one_function_commits_with_specific_subjects() -> None:
    f, g = ("a.py", "f"), ("a.py", "g")
    indexed = {f: unit("f", 1, 3), g: unit("g", 5, 9)}
    commits = [
        Commit("c1", 2, "Merge branch 'x' into handle empty input", frozenset({f})),
        Commit("c2", 1, "fix typo", frozenset({f})),
        Commit("c3", 1, "handle an empty input in f", frozenset({f, g})),
        Commit("c4", 1, "return the cached value when the key is known", frozenset({g})),
        Commit("c5", 1, "make the parser accept tabs", frozenset({("b.py", "gone")})),
        Commit("c6", 1, "keep the newest question per function only", frozenset({g})),
        Commit("c7", 1, "change the sign of an offset here", frozenset()),
        Commit("c8", 1, "strip leading prefixes from f", frozenset({f})),
    ]
    qs = question_set(commits, indexed)
    assert [(q.commit, q.qualified_name) for q in qs.questions] == [("c4", "g"), ("c8", "f")]
    assert qs.questions[0].text == "return the cached value when the key is known"
    assert qs.questions[0].definition == "def g():"
    assert qs.skipped == {
        "merge": 1,
        "vague-typo": 1,
        "several-functions": 1,
        "gone-at-revision": 1,
        "duplicate": 1,
        "no-function": 1,
    }
    assert question_set(commits, indexed, max_questions=1).questions[0].commit == "c4"


def test_rank_and_metrics() -> None:
    q = Question("t", "c", "s", "a.py", "f", "def f(x):")
    hits = [("b.py", "def f(x):"), ("a.py", "x = 1"), ("a.py", "  def f(x):\n  return")]
    assert rank_of(q, hits) == 3
    assert rank_of(q, hits[:2]) is None
    m = metrics([1, 3, None, 7])
    assert m == Metrics(4, 0.25, 0.5, 0.75, round((1 + 1 / 3 + 1 / 7) / 4, 4))
    assert metrics([]) == Metrics(0, 0.0, 0.0, 0.0, 0.0)
    assert dropped(m, Metrics(4, 0.25, 0.25, 0.75, 0.2), 0.1) == ["recall_at_5", "mrr_at_10"]
