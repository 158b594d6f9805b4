"""Which files each wave parses and which declared paths each wave's declaration replaces.

The rule behind ``sweep/chunk_waves.py``: every row is declared before it is written, and
between waves the declared generation must never claim a path complete that is not. So
the first wave of a full generation (nothing recorded can be reused) clears the old
declaration; otherwise the first wave also drops the paths that are gone, and each wave
replaces only its own paths, so a changed path keeps its old declaration (whose rows are
still present) until its own wave replaces it.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Wave:
    paths: tuple[str, ...]  # parsed and declared together, in this order
    replace: frozenset[str] | None  # declared paths this wave replaces; None: all of them


def plan_waves(
    to_parse: Sequence[str],
    replaced: Iterable[str],
    *,
    full: bool,
    wave_files: int,
    first_wave_files: int | None = None,
) -> list[Wave]:
    """``to_parse`` in waves of ``wave_files``, in order; the first has at most
    ``first_wave_files`` (a small first wave starts the first write early, bigger later
    waves make fewer, bigger writes). ``replaced``: the recorded paths whose chunks are
    rewritten or dropped; ``full``: no recorded chunk is reused."""
    if wave_files < 1:
        raise ValueError(f"wave_files must be at least 1, got {wave_files}")
    first = wave_files if first_wave_files is None else min(first_wave_files, wave_files)
    if first < 1:
        raise ValueError(f"first_wave_files must be at least 1, got {first_wave_files}")
    gone = frozenset(replaced) - frozenset(to_parse)
    starts = [0, *range(first, len(to_parse), wave_files)] if to_parse else []
    waves: list[Wave] = []
    for start, end in zip(starts, [*starts[1:], len(to_parse)], strict=False):
        paths = tuple(to_parse[start:end])
        if start == 0:
            replace = None if full else frozenset(paths) | gone
        else:
            replace = frozenset(paths)
        waves.append(Wave(paths, replace))
    return waves
