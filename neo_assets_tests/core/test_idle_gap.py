"""The rule deciding when the process has gone idle before an embedded add."""

import pytest

from neo_assets.core.idle_gap import IDLE_SHARE, MAX_S, SLICE_S, gap_over, slice_was_idle


def test_a_slice_is_idle_only_below_its_share_of_cpu() -> None:
    assert slice_was_idle(0.0)
    assert slice_was_idle(SLICE_S * IDLE_SHARE * 0.99)
    assert not slice_was_idle(SLICE_S * IDLE_SHARE)
    assert not slice_was_idle(SLICE_S)  # another thread ran through the whole slice
    assert slice_was_idle(0.004, slice_s=0.02) and not slice_was_idle(0.006, slice_s=0.02)


@pytest.mark.parametrize(
    ("cpu_used_s", "waited_s", "over"),
    [
        (0.0, 0.002, True),  # idle at once
        (SLICE_S, 0.002, False),  # busy: wait on
        (SLICE_S, MAX_S - 0.001, False),
        (SLICE_S, MAX_S, True),  # busy, but the wait is capped
        (SLICE_S, 10.0, True),
    ],
)
def test_the_gap_ends_when_idle_or_capped(cpu_used_s: float, waited_s: float, over: bool) -> None:
    assert gap_over(cpu_used_s, waited_s) is over
