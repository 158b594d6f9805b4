"""The transport rules (``neo_assets/serve/rules/transport.py``) over plain data."""

from neo_assets.serve.rules.transport import (
    Admission,
    ConnectionLimits,
    Held,
    admit,
    is_keepalive_chunk,
    past_deadline,
    stream_admitted,
    stream_idle,
)

LIMITS = ConnectionLimits(per_client=3, max_pending=4)


def test_a_connection_under_every_cap_is_accepted_and_displaces_nothing() -> None:
    held = [Held(1, "a", True), Held(2, "b", False)]
    assert admit("a", held, LIMITS) == Admission(True)


def test_an_address_at_its_cap_displaces_its_own_oldest_pending_connection() -> None:
    held = [Held(1, "a", False), Held(2, "a", True), Held(3, "a", True), Held(4, "b", True)]
    got = admit("a", held, LIMITS)
    assert (got.accept, got.evict, got.reason) == (True, 2, "per-client")


def test_an_address_whose_connections_are_all_being_answered_is_refused() -> None:
    held = [Held(k, "a", False) for k in range(3)]
    got = admit("a", held, LIMITS)
    assert (got.accept, got.evict, got.reason) == (False, None, "per-client")
    # Another address is not refused for it.
    assert admit("b", held, LIMITS).accept


def test_past_the_pending_cap_the_busiest_addresses_oldest_pending_one_makes_room() -> None:
    held = [
        Held("b1", "b", True),
        Held("x1", "x", True),
        Held("x2", "x", True),
        Held("c1", "c", False),
        Held("x3", "x", True),
    ]
    # 4 pending: x holds 3 of them, so x's oldest goes (not b1, the oldest overall).
    assert admit("new", held, LIMITS) == Admission(True, "x1", "pending")
    # A tie between addresses: the oldest pending among them goes.
    tied = [Held("b1", "b", True), Held("x1", "x", True), Held("b2", "b", True)]
    tied.append(Held("x2", "x", True))
    assert admit("new", tied, LIMITS).evict == "b1"


def test_the_pending_cap_ignores_connections_being_answered() -> None:
    held = [Held(k, f"addr{k}", False) for k in range(10)]
    assert admit("new", held, LIMITS) == Admission(True)


def test_streams_per_token() -> None:
    assert stream_admitted(0, 2) and stream_admitted(1, 2)
    assert not stream_admitted(2, 2)


def test_keepalive_comments_are_not_activity_and_events_are() -> None:
    assert is_keepalive_chunk(b": ping - 2026-12-04 09:00:00\r\n\r\n")
    assert is_keepalive_chunk(b"\r\n")
    assert not is_keepalive_chunk(b"event: message\r\ndata: {}\r\n\r\n")
    assert not is_keepalive_chunk(b": ping\r\n\r\ndata: {}\r\n\r\n")


def test_idle_and_deadline() -> None:
    assert not stream_idle(10.0, 14.9, 5.0) and stream_idle(10.0, 15.0, 5.0)
    assert not past_deadline(9.99, 10.0) and past_deadline(10.0, 10.0)
