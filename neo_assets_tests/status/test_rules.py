"""The snapshot in words and when it is refreshed (core/status.py), over plain data."""

from neo_assets.core import codes
from neo_assets.status.rules import (
    DEFAULT_FIX,
    STATE_COMPLETE,
    STATE_DEFERRED,
    STATE_FAILED,
    STATE_NEVER,
    STATE_RETIRED,
    FinishedRun,
    failure_fix,
    refresh_request,
    repo_state_line,
)

NEXT = 1_764_640_800.0  # 2025-12-02 02:00 UTC


def test_each_state_says_what_to_act_on() -> None:
    assert repo_state_line({"outcome": "complete", "rows": 12}) == (STATE_COMPLETE, "12 rows")
    state, text = repo_state_line(
        {
            "outcome": "deferred",
            "deferredCauseCode": codes.KB_VECTOR_EMBED_CONNECTION_REFUSED,
            "nextDueAt": NEXT,
        }
    )
    assert state == STATE_DEFERRED
    assert text == "KB_VECTOR_EMBED_CONNECTION_REFUSED; next try 2025-12-02 02:00 UTC"
    state, text = repo_state_line(
        {
            "outcome": "failed",
            "deferredCauseCode": codes.SOURCE_UNREADABLE,
            "error": "acme/widgets: ref 'mian' does not exist",
            "nextDueAt": NEXT,
        }
    )
    assert state == STATE_FAILED
    assert text.startswith("SOURCE_UNREADABLE: acme/widgets: ref 'mian' does not exist Fix: ")
    assert "`ref:`" in text and "2025-12-02 02:00 UTC" in text
    # An error that names its own fix keeps it, said once; the code is not repeated.
    _, text = repo_state_line(
        {
            "outcome": "failed",
            "deferredCauseCode": codes.SOURCE_REPO_MISSING,
            "error": "SOURCE_REPO_MISSING: ref 'mian' is unknown. Fix: set ref: to a branch.",
        }
    )
    assert text.startswith("SOURCE_REPO_MISSING: ref 'mian' is unknown. Fix: set ref: to a")
    assert text.count("Fix:") == 1 and text.count("SOURCE_REPO_MISSING") == 1
    state, text = repo_state_line({"outcome": "complete", "retired": True, "rows": 3})
    assert state == STATE_RETIRED and text.startswith("left tenants.yaml; 3 rows wait")
    assert repo_state_line({"outcome": None})[0] == STATE_NEVER


def test_every_failure_code_has_its_own_fix_and_others_a_default() -> None:
    for code in (codes.SOURCE_REPO_MISSING, codes.SOURCE_UNREADABLE, codes.PARSE_FAILED):
        assert failure_fix(code) != DEFAULT_FIX
    assert failure_fix("SOMETHING_NEW") == DEFAULT_FIX and failure_fix(None) == DEFAULT_FIX


def test_a_refresh_is_asked_once_per_batch_of_ended_runs() -> None:
    runs = [FinishedRun("r1", 10.0), FinishedRun("r2", 20.0)]
    assert refresh_request([], None) == (None, None)
    assert refresh_request(runs, None) == ("status:after:r2", 20.0)
    assert refresh_request(runs, 20.0) == (None, 20.0)  # nothing new: nothing asked
    later = [*runs, FinishedRun("r3", 25.0)]
    assert refresh_request(later, 20.0) == ("status:after:r3", 25.0)


def test_behind_says_why_from_the_sensors_due_reason() -> None:
    from neo_assets.status.rules import behind_line
    from neo_assets.sweep.rules.scheduling import (
        DUE_BACKOFF_ELAPSED,
        DUE_DECLARATION_MOVED,
        DUE_GENERATION_CHANGED,
        DUE_NEVER_SWEPT,
        DUE_REVISION_MOVED,
    )

    a, b = "a" * 40, "b" * 40
    assert behind_line(DUE_REVISION_MOVED, a, b) == (
        True,
        f"head moved from {a[:12]} to {b[:12]}",
    )
    # A failed repo in backoff whose head moved is still behind, and says so.
    assert behind_line(DUE_BACKOFF_ELAPSED, a, b)[0] is True
    assert behind_line(DUE_DECLARATION_MOVED, a, a) == (True, "declaration changed")
    assert behind_line(DUE_GENERATION_CHANGED, a, a) == (True, "embedding generation changed")
    assert behind_line(DUE_NEVER_SWEPT, None, a) == (True, "never swept")
    assert behind_line(None, a, a) == (False, None)
    assert behind_line(None, a, None) == (None, "the repo cannot be read now")
