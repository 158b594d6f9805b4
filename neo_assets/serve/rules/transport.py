"""What a client may hold of the query service before and while it is answered (pure, used
by ``serve/limits.py``). A *pending* connection (no request being answered) costs only a
socket, so it is what an attacker multiplies: closed after the header timeout, and the
oldest gives way when an address or the service holds too many. Streams are capped per
token; a request's deadline is one instant."""

from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ConnectionLimits:
    per_client: int  # connections one client address may hold at once
    max_pending: int  # pending connections of every address together


@dataclass(frozen=True)
class Held:
    """One open connection: who, from where, and whether it is pending (oldest first)."""

    key: Hashable
    address: str
    pending: bool


@dataclass(frozen=True)
class Admission:
    accept: bool
    evict: Hashable | None = None  # the pending connection closed to make room
    reason: str | None = None  # why, when something is refused or evicted


def admit(address: str, held: Sequence[Held], limits: ConnectionLimits) -> Admission:
    """Whether a new connection from ``address`` is accepted given those ``held`` (oldest
    first), and which pending one it displaces: its address's oldest at the address cap
    (refused only when all are being answered), else past the service's cap the oldest of
    the address holding the most."""
    mine = [h for h in held if h.address == address]
    if len(mine) >= limits.per_client:
        oldest = next((h for h in mine if h.pending), None)
        if oldest is None:
            return Admission(False, None, "per-client")
        return Admission(True, oldest.key, "per-client")
    pending = [h for h in held if h.pending]
    if len(pending) >= limits.max_pending:
        counts: dict[str, int] = {}
        for h in pending:
            counts[h.address] = counts.get(h.address, 0) + 1
        most = max(counts.values())
        # The oldest pending connection among the addresses holding the most.
        victim = next(h for h in pending if counts[h.address] == most)
        return Admission(True, victim.key, "pending")
    return Admission(True)


def stream_admitted(open_streams: int, limit: int) -> bool:
    """Whether a token holding ``open_streams`` streams may open one more."""
    return open_streams < limit


def is_keepalive_chunk(body: bytes) -> bool:
    """A chunk of a server-sent event stream that carries no event: blank lines and
    comments (``: ping``). Only events count as activity for the idle timeout."""
    lines = [line for line in body.splitlines() if line.strip()]
    return all(line.startswith(b":") for line in lines)


def stream_idle(last_event_at: float, now: float, idle_s: float) -> bool:
    """Whether a stream whose last event left at ``last_event_at`` is idle at ``now``."""
    return now - last_event_at >= idle_s


def past_deadline(now: float, deadline: float) -> bool:
    """Whether an answer ready at ``now`` comes after the request's ``deadline``: it is
    then a 504, whatever the work found."""
    return now >= deadline
