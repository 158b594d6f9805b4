"""The rule deciding when the process has gone idle before an embedded add."""

import pytest

from neo_assets.concurrency.idle_gap import (
    IDLE_SHARE,
    IDLE_SLICES,
    MAX_S,
    SLICE_S,
    gap_over,
    slice_was_idle,
)


def test_a_slice_is_idle_only_below_its_share_of_cpu() -> None:
    assert slice_was_idle(0.0)
    assert slice_was_idle(SLICE_S * IDLE_SHARE * 0.99)
    assert not slice_was_idle(SLICE_S * IDLE_SHARE)
    assert not slice_was_idle(SLICE_S)  # another thread ran through the whole slice
    assert slice_was_idle(0.004, slice_s=0.02) and not slice_was_idle(0.006, slice_s=0.02)


@pytest.mark.parametrize(
    ("idle_streak", "waited_s", "over"),
    [
        (IDLE_SLICES, 3 * SLICE_S, True),  # idle at once
        (IDLE_SLICES - 1, 0.002, False),  # one quiet moment is not idle yet
        (0, 0.002, False),  # busy: wait on
        (0, MAX_S - 0.001, False),
        (0, MAX_S, True),  # busy, but the wait is capped
        (1, 10.0, True),
    ],
)
def test_the_gap_ends_after_a_run_of_idle_slices_or_at_the_cap(
    idle_streak: int, waited_s: float, over: bool
) -> None:
    assert gap_over(idle_streak, waited_s) is over
