"""FirstAhead: the first item is computed on a thread from construction on; iterating
gives exactly what the source gives, its exception included."""

import threading
import time
from collections.abc import Iterator

import pytest

from neo_assets.concurrency.ahead import FirstAhead


def test_the_first_item_is_computed_before_anyone_asks_and_the_rest_follow() -> None:
    computed = threading.Event()
    threads: list[str] = []

    def source() -> Iterator[int]:
        threads.append(threading.current_thread().name)
        computed.set()
        yield 1
        threads.append(threading.current_thread().name)
        yield 2

    ahead = FirstAhead(source(), name="ahead-test")
    assert computed.wait(5)  # nobody iterated yet
    assert list(ahead) == [1, 2]
    assert threads == ["ahead-test", threading.current_thread().name]


def test_an_exception_of_the_first_item_is_raised_to_whoever_iterates() -> None:
    def source() -> Iterator[int]:
        raise ValueError("first failed")
        yield 0  # pragma: no cover

    ahead = FirstAhead(source())
    with pytest.raises(ValueError, match="first failed"):
        next(ahead)
    assert list(ahead) == []  # the source is finished, as after any generator's error


def test_an_empty_source_is_an_empty_iteration() -> None:
    assert list(FirstAhead(iter(()))) == []


def test_close_waits_for_the_first_item() -> None:
    done: list[float] = []

    def source() -> Iterator[int]:
        time.sleep(0.2)
        done.append(time.monotonic())
        yield 1

    ahead = FirstAhead(source())
    ahead.close()
    assert done  # closed only once the thread had finished with the source
    assert next(ahead) == 1
