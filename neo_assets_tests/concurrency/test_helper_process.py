"""Helper processes: answers in order, and every way a helper can fail ends in
HelperUnavailable (do it in-process), never in a hang or a wrong answer."""

import contextlib
import os
import subprocess
import sys
import time

import pytest

from neo_assets.concurrency.helper_process import (
    HelperProcess,
    HelperUnavailable,
)

ECHO = "neo_assets_tests.fakes.echo_helper"


def test_answers_come_back_in_order_and_intact() -> None:
    with HelperProcess(ECHO) as helper:
        payload = {"rows": [("a" * 1000, i, 1.5) for i in range(2000)]}  # > a pipe buffer
        assert helper.call(("echo", payload), wait_ready_s=30, answer_within_s=30) == payload
        assert helper.call(("echo", 7), answer_within_s=30) == 7


def test_a_helper_exits_cleanly_on_close() -> None:
    helper = HelperProcess(ECHO)
    assert helper.call(("echo", 1), wait_ready_s=30, answer_within_s=30) == 1
    helper.close()
    assert helper._proc.returncode == 0  # ended by its end of input, not killed


def test_a_helper_runs_numpy_on_one_thread_whatever_its_parent_asked(monkeypatch) -> None:
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "8")
    with HelperProcess(ECHO) as helper:
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            assert helper.call(("env", name), wait_ready_s=30, answer_within_s=30) == "1"


def test_the_hashing_helper_imports_only_the_arithmetic() -> None:
    """It boots beside a sweep's envelope: asyncio and the provider machinery are start-up
    time it does not need. What its main imports, in a fresh interpreter:"""
    probe = (
        "import sys\n"
        "from neo_assets.concurrency import hashing_worker\n"
        "from neo_assets.embedding.providers.hash_features import embed_texts\n"
        "assert embed_texts(['x'], 8).shape == (1, 8)\n"
        "print(sorted(m for m in ('asyncio', 'neo_assets.embedding.providers.hashing')"
        " if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_a_helper_still_starting_is_unavailable_at_once() -> None:
    with HelperProcess(ECHO) as helper:
        with pytest.raises(HelperUnavailable, match="starting"):
            helper.call(("echo", 1), answer_within_s=30)  # no wait: it is not up yet
        assert helper.broken is None  # only not ready: usable later
        assert helper.call(("echo", 1), wait_ready_s=30, answer_within_s=30) == 1


def test_an_error_in_the_handler_is_reported_and_the_helper_stays_usable() -> None:
    with HelperProcess(ECHO) as helper:
        with pytest.raises(HelperUnavailable, match="RuntimeError: bad input"):
            helper.call(("raise", "bad input"), wait_ready_s=30, answer_within_s=30)
        assert helper.call(("echo", "ok"), answer_within_s=30) == "ok"


def test_a_helper_that_does_not_answer_in_time_is_killed_not_waited_on() -> None:
    with HelperProcess(ECHO) as helper:
        helper.call(("echo", 0), wait_ready_s=30, answer_within_s=30)
        started = time.monotonic()
        with pytest.raises(HelperUnavailable, match="did not answer within 0.5 s"):
            helper.call(("sleep", 60), answer_within_s=0.5)
        assert time.monotonic() - started < 30
        assert helper._proc.poll() is not None
        with pytest.raises(HelperUnavailable, match="did not answer"):
            helper.call(("echo", 1), answer_within_s=30)  # broken stays broken


def test_an_answer_in_the_pipe_past_the_deadline_is_taken_not_killed(monkeypatch) -> None:
    """The parent reads late (an embedded add held its GIL): the child answered in time,
    so it gets one more period instead of being killed with its answer in the pipe."""
    import neo_assets.concurrency.helper_process as hp

    real = hp._read_exact
    late = {"s": 0.0}

    def read_late(stream, n):  # noqa: ANN001, ANN202
        if late.get("s"):
            time.sleep(late.pop("s"))  # the first read of the call, long after the answer
        return real(stream, n)

    monkeypatch.setattr(hp, "_read_exact", read_late)
    with HelperProcess(ECHO) as helper:
        helper.call(("echo", 0), wait_ready_s=30, answer_within_s=30)
        late["s"] = 0.8
        assert helper.call(("echo", "answered"), answer_within_s=0.5) == "answered"
        assert helper.broken is None and helper._proc.poll() is None
        time.sleep(0.5)  # past the extended deadline too: nothing fires after the call
        assert helper.call(("echo", 1), answer_within_s=30) == 1
        # The extension is once: an answer begun but not read within it is given up.
        late["s"] = 1.5
        with contextlib.suppress(HelperUnavailable):  # read from the pipe, or not
            helper.call(("echo", "too late"), answer_within_s=0.4)
        assert helper.broken == "helper did not answer within 0.4 s"
        assert helper._proc.poll() is not None


def test_a_helper_that_dies_mid_request_is_unavailable() -> None:
    with HelperProcess(ECHO) as helper:
        helper.call(("echo", 0), wait_ready_s=30, answer_within_s=30)
        with pytest.raises(HelperUnavailable, match="pipe failed"):
            helper.call(("exit", 3), answer_within_s=30)
        assert helper.broken is not None


def test_a_helper_that_cannot_start_is_broken_with_its_exit_code() -> None:
    with HelperProcess("neo_assets_tests.fakes.no_such_helper") as helper:
        with pytest.raises(HelperUnavailable, match="exited with 1 before it was ready"):
            helper.call(("echo", 0), wait_ready_s=30, answer_within_s=30)


def test_a_helper_starts_in_a_process_with_over_1024_open_descriptors() -> None:
    """select() refused a descriptor numbered 1024 or more ("filedescriptor out of range"),
    and the suite's own process got there: a sweep's parser failed instead of helping."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the descriptor limit here is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with HelperProcess(ECHO) as helper:
            assert helper.call(("echo", 3), wait_ready_s=30, answer_within_s=30) == 3
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_helpers_kept_on_some_cores_are_started_there_and_released_after() -> None:
    from neo_assets.concurrency.helper_process import keep_helpers_on

    anywhere = os.sched_getaffinity(0)
    if len(anywhere) < 2:
        pytest.skip("needs two allowed cores")
    one = {min(anywhere)}
    keep_helpers_on(one)
    try:
        with HelperProcess(ECHO) as helper:
            assert os.sched_getaffinity(helper.pid) == one  # from its spawn on
            keep_helpers_on(None)
            assert os.sched_getaffinity(helper.pid) == anywhere
            assert helper.call(("echo", 2), wait_ready_s=30, answer_within_s=30) == 2
    finally:
        keep_helpers_on(None)
