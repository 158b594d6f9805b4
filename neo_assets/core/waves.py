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
    to_parse: Sequence[str], replaced: Iterable[str], *, full: bool, wave_files: int
) -> list[Wave]:
    """``to_parse`` in waves of ``wave_files``, in order. ``replaced``: the recorded paths
    whose chunks are rewritten or dropped; ``full``: no recorded chunk is reused."""
    if wave_files < 1:
        raise ValueError(f"wave_files must be at least 1, got {wave_files}")
    gone = frozenset(replaced) - frozenset(to_parse)
    waves: list[Wave] = []
    for start in range(0, len(to_parse), wave_files):
        paths = tuple(to_parse[start : start + wave_files])
        if start == 0:
            replace = None if full else frozenset(paths) | gone
        else:
            replace = frozenset(paths)
        waves.append(Wave(paths, replace))
    return waves
