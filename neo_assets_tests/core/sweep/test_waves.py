"""The wave plan: every file parsed once, in order; replacements that never drop a path
before its own wave (except paths that are gone, and a full generation's first clear)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neo_assets.core.sweep.waves import WAVE_GROWTH, Wave, plan_waves


def test_a_full_generation_is_cleared_by_its_first_wave_and_then_only_added_to() -> None:
    waves = plan_waves(["a", "b", "c", "d", "e"], ["a", "old"], full=True, wave_files=2)
    assert waves == [
        Wave(("a", "b"), None),
        Wave(("c", "d"), frozenset()),
        Wave(("e",), frozenset()),
    ]


def test_gone_paths_are_dropped_with_the_first_wave_and_changed_ones_with_their_own() -> None:
    waves = plan_waves(["x", "changed", "new"], ["changed", "gone"], full=False, wave_files=1)
    assert waves[0] == Wave(("x",), frozenset({"x", "gone"}))
    assert waves[1] == Wave(("changed",), frozenset({"changed"}))
    assert waves[2] == Wave(("new",), frozenset({"new"}))


def test_a_small_first_wave_then_full_ones() -> None:
    waves = plan_waves(list("abcdefgh"), [], full=True, wave_files=2, first_wave_files=1)
    assert [w.paths for w in waves] == [("a",), ("b", "c"), ("d", "e"), ("f", "g"), ("h",)]
    assert [w.replace for w in waves] == [None, *[frozenset()] * 4]
    changed = plan_waves(list("abcd"), ["b", "z"], full=False, wave_files=2, first_wave_files=1)
    assert [w.replace for w in changed] == [frozenset("az"), frozenset("bc"), frozenset("d")]
    with pytest.raises(ValueError, match="first_wave_files"):
        plan_waves(["a"], [], full=True, wave_files=2, first_wave_files=0)


def test_later_waves_grow_from_the_first_up_to_the_cap() -> None:
    files = [f"f{i}" for i in range(2000)]
    waves = plan_waves(files, [], full=True, wave_files=1000, first_wave_files=150)
    assert [len(w.paths) for w in waves] == [150, 300, 600, 950]
    waves = plan_waves(files * 2, [], full=True, wave_files=1000, first_wave_files=150)
    assert [len(w.paths) for w in waves] == [150, 300, 600, 1000, 1000, 950]


def test_nothing_to_parse_is_no_wave() -> None:
    assert plan_waves([], ["gone"], full=False, wave_files=3) == []


def test_a_wave_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="wave_files"):
        plan_waves(["a"], [], full=True, wave_files=0)


paths = st.lists(st.text("abcdef", min_size=1, max_size=3), unique=True, max_size=30)


@given(
    to_parse=paths,
    other=paths,
    full=st.booleans(),
    wave_files=st.integers(1, 7),
    first_wave_files=st.none() | st.integers(1, 9),
)
def test_every_file_once_in_order_and_no_early_drop(
    to_parse: list[str],
    other: list[str],
    full: bool,
    wave_files: int,
    first_wave_files: int | None,
) -> None:
    replaced = set(other) | set(to_parse[::2])
    waves = plan_waves(
        to_parse, replaced, full=full, wave_files=wave_files, first_wave_files=first_wave_files
    )
    assert [p for w in waves for p in w.paths] == to_parse
    assert all(1 <= len(w.paths) <= wave_files for w in waves)
    if waves:
        # The first wave is as big as allowed, and only the last of the others is short.
        first = min(first_wave_files or wave_files, wave_files)
        assert len(waves[0].paths) == min(first, len(to_parse))
        # Each later wave is WAVE_GROWTH times the one before, up to wave_files (the last
        # may be short).
        sizes = [len(w.paths) for w in waves]
        for k in range(1, len(sizes) - 1):
            assert sizes[k] == min(sizes[k - 1] * WAVE_GROWTH, wave_files)
    for i, wave in enumerate(waves):
        if wave.replace is None:
            assert i == 0 and full
            continue
        # A wave replaces its own paths, and (the first only) the paths that are gone:
        # never a path that a later wave will parse. A full generation's later waves
        # replace nothing: its first wave cleared every declared path.
        later = {p for w in waves[i + 1 :] for p in w.paths}
        assert not (wave.replace & later)
        if full:
            assert i > 0 and wave.replace == frozenset()
        else:
            assert set(wave.paths) <= wave.replace
            if i > 0:
                assert wave.replace == set(wave.paths)
    if waves and not full:
        assert waves[0].replace >= replaced - set(to_parse)
