"""Lease rules: who may hold a key, until when, and when a holder has lost it (the epoch is a
fencing token). The model the store applies atomically; time is an argument.
Design: docs/design/sweep.md#lease"""

from dataclasses import dataclass, replace

# expires_at of a released lease: earlier than any clock reading, so the key is free.
RELEASED_AT = 0.0
# Sweeps of one repo share one key per partition.
SWEEP_KEY_PREFIX = "sweep:"


@dataclass(frozen=True)
class LeaseRecord:
    key: str
    holder: str
    epoch: int
    acquired_at: float
    expires_at: float


def sweep_lease_key(tenant_id: str, repo_slug: str) -> str:
    """The lease key of one tenant repo (its partition key, namespaced)."""
    return f"{SWEEP_KEY_PREFIX}{tenant_id}/{repo_slug}"


def expiry(now: float, ttl_s: float) -> float:
    if not ttl_s > 0:
        raise ValueError(f"a lease TTL must be positive, got {ttl_s!r}")
    return now + ttl_s


def is_released(record: LeaseRecord) -> bool:
    return record.expires_at <= RELEASED_AT


def is_free(record: LeaseRecord | None, now: float) -> bool:
    """Nobody holds the key at ``now`` (never taken, released, or expired)."""
    return record is None or is_released(record) or now >= record.expires_at


def may_acquire(record: LeaseRecord | None, holder: str, now: float) -> bool:
    return is_free(record, now) or (record is not None and record.holder == holder)


def after_acquire(
    record: LeaseRecord | None, key: str, holder: str, ttl_s: float, now: float
) -> LeaseRecord | None:
    """The row after ``holder`` tries to acquire ``key``; None when refused."""
    until = expiry(now, ttl_s)
    if record is None:
        return LeaseRecord(key=key, holder=holder, epoch=1, acquired_at=now, expires_at=until)
    if not may_acquire(record, holder, now):
        return None
    if record.holder == holder:
        return replace(record, expires_at=until)
    return LeaseRecord(
        key=key, holder=holder, epoch=record.epoch + 1, acquired_at=now, expires_at=until
    )


def after_renew(
    record: LeaseRecord | None, holder: str, ttl_s: float, now: float, epoch: int | None = None
) -> LeaseRecord | None:
    """The row after ``holder`` renews; None when it no longer has the lease. An expired lease
    nobody took over is still the holder's; a released one is not."""
    until = expiry(now, ttl_s)
    if record is None or record.holder != holder or is_released(record):
        return None
    if epoch is not None and record.epoch != epoch:
        return None
    return replace(record, expires_at=until)


def after_release(
    record: LeaseRecord | None, holder: str, epoch: int | None = None
) -> LeaseRecord | None:
    """The row after ``holder`` releases (kept, so the epoch keeps growing); None when the
    release does not apply (someone else holds it, or the epoch moved)."""
    if record is None or record.holder != holder:
        return None
    if epoch is not None and record.epoch != epoch:
        return None
    return replace(record, expires_at=RELEASED_AT)


def heartbeat_interval(ttl_s: float) -> float:
    """How often a holder renews: three chances before the lease would expire."""
    return ttl_s / 3.0


def poll_delay(now: float, deadline: float, ttl_s: float) -> float | None:
    """How long a waiter sleeps before trying again; None once the wait is over.

    Short against the TTL (a tenth, at most a second) so a released key is noticed soon.
    """
    if now >= deadline:
        return None
    step = min(1.0, max(0.05, ttl_s / 10.0))
    return min(step, deadline - now)


def still_valid(valid_until: float, now: float, margin_s: float) -> bool:
    """A holder may write only while its last confirmed expiry is ``margin_s`` away."""
    return now + margin_s < valid_until


def write_margin(ttl_s: float) -> float:
    """Safety margin before expiry inside which a holder stops writing (a tenth of TTL)."""
    return ttl_s / 10.0
