"""Lease rules as pure functions: freedom, re-entry, takeover, renewal, release, waiting."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neo_assets.sweep.rules.leases import (
    RELEASED_AT,
    LeaseRecord,
    after_acquire,
    after_release,
    after_renew,
    expiry,
    heartbeat_interval,
    is_free,
    is_released,
    may_acquire,
    poll_delay,
    still_valid,
    sweep_lease_key,
    write_margin,
)

K = "sweep:acme/widgets"


def rec(holder: str = "a", epoch: int = 1, acquired: float = 100.0, expires: float = 130.0):
    return LeaseRecord(key=K, holder=holder, epoch=epoch, acquired_at=acquired, expires_at=expires)


def test_sweep_key_is_the_partition_key_namespaced() -> None:
    assert sweep_lease_key("acme", "widgets") == K


@pytest.mark.parametrize("ttl", [0.0, -1.0, float("nan")])
def test_a_ttl_must_be_positive(ttl: float) -> None:
    with pytest.raises(ValueError):
        expiry(10.0, ttl)


def test_expiry_is_now_plus_ttl() -> None:
    assert expiry(10.0, 5.0) == 15.0


def test_free_when_never_taken_released_or_expired() -> None:
    assert is_free(None, 0.0)
    assert is_free(rec(expires=RELEASED_AT), 50.0)
    assert is_released(rec(expires=RELEASED_AT)) and not is_released(rec())
    assert not is_free(rec(expires=130.0), 129.999)
    assert is_free(rec(expires=130.0), 130.0)  # the expiry instant belongs to the next holder
    assert is_free(rec(expires=130.0), 500.0)


def test_only_the_holder_may_acquire_a_live_lease() -> None:
    live = rec(holder="a", expires=130.0)
    assert may_acquire(live, "a", 120.0)
    assert not may_acquire(live, "b", 120.0)
    assert may_acquire(live, "b", 130.0)
    assert may_acquire(None, "b", 0.0)


def test_first_acquire_starts_at_epoch_one() -> None:
    got = after_acquire(None, K, "a", 30.0, 100.0)
    assert got == LeaseRecord(K, "a", 1, 100.0, 130.0)


def test_reacquire_by_the_holder_extends_and_keeps_epoch_and_start() -> None:
    got = after_acquire(
        rec(holder="a", epoch=4, acquired=100.0, expires=130.0), K, "a", 30.0, 120.0
    )
    assert got == LeaseRecord(K, "a", 4, 100.0, 150.0)
    # even after its own lease expired, or after releasing it: nobody held it in between
    assert after_acquire(rec(holder="a", epoch=4), K, "a", 30.0, 999.0).epoch == 4
    assert (
        after_acquire(rec(holder="a", epoch=4, expires=RELEASED_AT), K, "a", 30.0, 1.0).epoch == 4
    )


def test_another_holder_is_refused_while_live_and_takes_over_after() -> None:
    live = rec(holder="a", epoch=4, expires=130.0)
    assert after_acquire(live, K, "b", 30.0, 129.0) is None
    taken = after_acquire(live, K, "b", 30.0, 131.0)
    assert taken == LeaseRecord(K, "b", 5, 131.0, 161.0)
    released = rec(holder="a", epoch=4, expires=RELEASED_AT)
    assert after_acquire(released, K, "b", 30.0, 50.0) == LeaseRecord(K, "b", 5, 50.0, 80.0)


def test_renew_extends_only_the_holders_own_unreleased_lease() -> None:
    live = rec(holder="a", epoch=2, expires=130.0)
    assert after_renew(live, "a", 30.0, 120.0) == rec(holder="a", epoch=2, expires=150.0)
    assert after_renew(live, "a", 30.0, 120.0, epoch=2) is not None
    assert after_renew(live, "a", 30.0, 120.0, epoch=3) is None  # the epoch moved: lost
    assert after_renew(live, "b", 30.0, 120.0) is None
    assert after_renew(None, "a", 30.0, 120.0) is None  # renewal never creates
    assert after_renew(rec(holder="a", expires=RELEASED_AT), "a", 30.0, 1.0) is None
    # expired but nobody took it: same holder and epoch prove nobody held it in between
    assert after_renew(live, "a", 30.0, 500.0, epoch=2) == rec(holder="a", epoch=2, expires=530.0)


def test_release_frees_and_keeps_the_row() -> None:
    live = rec(holder="a", epoch=3)
    assert after_release(live, "a") == rec(holder="a", epoch=3, expires=RELEASED_AT)
    assert after_release(live, "a", epoch=3) is not None
    assert after_release(live, "a", epoch=2) is None
    assert after_release(live, "b") is None
    assert after_release(None, "a") is None


def test_heartbeat_renews_three_times_per_ttl() -> None:
    assert heartbeat_interval(30.0) == 10.0


def test_poll_delay_is_short_and_never_passes_the_deadline() -> None:
    assert poll_delay(10.0, 10.0, 30.0) is None
    assert poll_delay(11.0, 10.0, 30.0) is None
    assert poll_delay(0.0, 100.0, 120.0) == 1.0  # at most a second
    assert poll_delay(0.0, 100.0, 2.0) == pytest.approx(0.2)  # a tenth of the TTL
    assert poll_delay(0.0, 100.0, 0.1) == 0.05  # but not a busy loop
    assert poll_delay(9.9, 10.0, 120.0) == pytest.approx(0.1)  # and not past the deadline


def test_a_holder_stops_writing_a_margin_before_expiry() -> None:
    assert write_margin(30.0) == 3.0
    assert still_valid(130.0, 126.9, 3.0)
    assert not still_valid(130.0, 127.0, 3.0)
    assert not still_valid(130.0, 140.0, 3.0)


# --- properties over random histories -------------------------------------------------
_op = st.tuples(
    st.sampled_from(["acquire", "renew", "release"]),
    st.sampled_from(["a", "b", "c"]),
    st.floats(min_value=0.0, max_value=50.0),  # time advance
    st.floats(min_value=0.5, max_value=40.0),  # ttl
)


@given(st.lists(_op, max_size=40))
def test_never_two_holders_and_epochs_grow_on_every_change_of_holder(ops) -> None:
    record: LeaseRecord | None = None
    now = 1.0
    for name, holder, advance, ttl in ops:
        now += advance
        before = record
        if name == "acquire":
            got = after_acquire(record, K, holder, ttl, now)
            if got is not None:
                # granted only when free or already ours: nobody else held it at `now`
                assert before is None or is_free(before, now) or before.holder == holder
                record = got
        elif name == "renew":
            record = after_renew(record, holder, ttl, now) or record
        else:
            record = after_release(record, holder) or record
        if before is not None and record is not None:
            if record.holder != before.holder:
                assert record.epoch == before.epoch + 1
            else:
                assert record.epoch == before.epoch
