"""Which files each wave parses and which declared paths each wave's declaration replaces.

The rule behind ``concurrency/chunk_waves.py``: every row is declared before it is written, and
between waves the declared generation must never claim a path complete that is not. So
the first wave of a full generation (nothing recorded can be reused) clears the old
declaration, and its later waves replace nothing (what the first cleared holds none of
their paths, and each path is in one wave: deleting them again cost a query per 500 paths
in every gap between two writes); otherwise the first wave also drops the paths that are
gone, and each wave replaces only its own paths, so a changed path keeps its old
declaration (whose rows are still present) until its own wave replaces it.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# Each wave has at most this many times the files of the one before (up to wave_files):
# fewer, bigger adds (each ~60 ms of fixed cost, plus the gap before it), while the
# pipeline stays fed. While wave k is written, the helper core hashes wave k+1 and parses
# wave k+2; per file that is ~0.3 ms of hashing and ~0.35 ms of parsing against ~3.2 ms
# of Chroma's add, so with growth g it needs (0.3 g + 0.35 g^2) / 3.2 of the write: 0.6
# at g = 2, over 1 at g = 3. Measured at g = 5: the third wave's parse was still running
# when the short first write ended, and the lane stalled while it was declared and hashed.
WAVE_GROWTH = 2


@dataclass(frozen=True)
class Wave:
    paths: tuple[str, ...]  # parsed and declared together, in this order
    # Declared paths this wave deletes before declaring its own; None: all of them.
    replace: frozenset[str] | None


def plan_waves(
    to_parse: Sequence[str],
    replaced: Iterable[str],
    *,
    full: bool,
    wave_files: int,
    first_wave_files: int | None = None,
) -> list[Wave]:
    """``to_parse`` in waves of at most ``wave_files``, in order. The first has at most
    ``first_wave_files`` (a small first wave starts the first write early) and each later
    one at most ``WAVE_GROWTH`` times the one before (bigger waves make fewer, bigger
    writes). ``replaced``: the recorded paths whose chunks are rewritten or dropped;
    ``full``: no recorded chunk is reused."""
    if wave_files < 1:
        raise ValueError(f"wave_files must be at least 1, got {wave_files}")
    first = wave_files if first_wave_files is None else min(first_wave_files, wave_files)
    if first < 1:
        raise ValueError(f"first_wave_files must be at least 1, got {first_wave_files}")
    gone = frozenset(replaced) - frozenset(to_parse)
    starts: list[int] = []
    sizes: list[int] = []
    start = 0
    while start < len(to_parse):
        size = min(sizes[-1] * WAVE_GROWTH, wave_files) if sizes else first
        starts.append(start)
        sizes.append(size)
        start += size
    waves: list[Wave] = []
    for start, end in zip(starts, [*starts[1:], len(to_parse)], strict=False):
        paths = tuple(to_parse[start:end])
        if start == 0:
            replace = None if full else frozenset(paths) | gone
        else:
            replace = frozenset() if full else frozenset(paths)
        waves.append(Wave(paths, replace))
    return waves
