"""Reciprocal-rank fusion of the ranked lists (vector, exact names, BM25): tests and docs
demoted, the parts of one unit answering as one, the vector list's best row kept in the
top few when it leads. Pure. Design: docs/design/query.md#ranking"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from neo_assets.query.rules.ranking import RRF_K, RankingOptions

# How much a test/doc row's fused score counts when the question is about source. Set
# a priori (not tuned on the self-evaluation sets that judge it): half, so a test ranks
# below a source row of the same evidence but above one with much less.
SECONDARY_WEIGHT = 0.5


def keeps_first(options: RankingOptions, similarities: Sequence[float]) -> RankingOptions:
    """``options`` as they apply to a vector list of these similarities, best first: its
    best row is not kept when it does not lead the second by ``options.keep_margin``."""
    if not options.keep_first or not options.keep_margin:
        return options
    if len(similarities) >= 2 and similarities[0] - similarities[1] >= options.keep_margin:
        return options
    return replace(options, keep_first=())


def fuse_lists(
    lists: Sequence[Sequence[str]],
    k: int,
    *,
    demoted: frozenset[str] | set[str] = frozenset(),
    unit_head: Mapping[str, str] | None = None,
    tiebreak: Mapping[str, int] | None = None,
    weights: Sequence[float] = (),
    rrf_k: int = RRF_K,
    place: Callable[[str], Any] | None = None,
    keep_first: Sequence[int] = (),
    keep_within: int = 5,
    best_part: frozenset[str] | set[str] = frozenset(),
) -> list[tuple[str, float, list[str]]]:
    """The top ``k`` by reciprocal-rank fusion of ``lists`` (equal scores by ``tiebreak``,
    then ``place``, then id); a ``demoted`` id counts SECONDARY_WEIGHT. With ``unit_head``
    the parts of one unit answer as its first part, scored by its best part, carrying the
    ids of its parts that matched. The best row of each list in ``keep_first`` (unless
    demoted) keeps a place in the top ``keep_within``: if fusion ranks it lower, it takes
    the last place(s) there, in fused order. A unit whose head is in ``best_part`` (one
    with no signature: a module) answers as its part that matched best instead."""
    fused: dict[str, float] = {}
    for at, ranked in enumerate(lists):
        weight = weights[at] if at < len(weights) else 1.0
        for i, rid in enumerate(ranked):
            fused[rid] = fused.get(rid, 0.0) + weight / (rrf_k + i + 1)
    for rid in demoted:
        if rid in fused:
            fused[rid] *= SECONDARY_WEIGHT
    last = 1 << 30
    order = sorted(
        fused,
        key=lambda rid: (-fused[rid], (tiebreak or {}).get(rid, last), (place or str)(rid)),
    )
    heads = unit_head or {}
    anchors = {
        heads.get(lists[i][0], lists[i][0])
        for i in keep_first
        if i < len(lists) and lists[i] and lists[i][0] not in demoted
    }
    out: list[tuple[str, float, list[str]]] = []
    at: dict[str, int] = {}
    for rid in order:
        head = heads.get(rid, rid)
        if head in at:
            out[at[head]][2].append(rid)
            continue
        at[head] = len(out)
        out.append((head, fused[rid], [rid]))
    k = max(0, k)
    if not any(entry[0] in anchors for entry in out[keep_within:]):
        return _answering(out[:k], best_part)
    anchored = [i for i, entry in enumerate(out) if entry[0] in anchors][:keep_within]
    others = [i for i, entry in enumerate(out) if entry[0] not in anchors]
    first = sorted(anchored + others[: keep_within - len(anchored)])
    taken = set(first)
    return _answering(
        [out[i] for i in first + [i for i in range(len(out)) if i not in taken]][:k], best_part
    )


def _answering(
    out: list[tuple[str, float, list[str]]], best_part: frozenset[str] | set[str]
) -> list[tuple[str, float, list[str]]]:
    """Each unit as the row it answers as: its head, or its best part for a head in
    ``best_part``."""
    if not best_part:
        return out
    return [(m[0] if h in best_part else h, s, m) for h, s, m in out]
