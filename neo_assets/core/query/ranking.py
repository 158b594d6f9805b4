"""Hybrid ranking: vector similarity fused with exact identifier / keyword matches.

Code questions name symbols (``dispatch_request``, ``ExactArgs``); an embedding blurs
them, a lexical match does not. Pure: the shell fetches the vector candidates and the
rows that contain the query's identifiers; these functions score and merge.

Fusion is reciprocal-rank (RRF, k=60): each list contributes ``1 / (60 + rank)``, so
neither score scale dominates, and a row found by both lists rises above either.
"""

import re
from collections.abc import Mapping, Sequence
from typing import Any

RRF_K = 60
# At most this many query terms are looked up lexically (each costs one store read).
MAX_TERMS = 4
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_STOP = frozenset(
    """a an and are as at be by do does for from how in is it of on or the this to what
    when where which who why with where's get set use used using code function class method
    file files return returns value values""".split()
)


def looks_like_identifier(word: str) -> bool:
    """A word a programmer would spell exactly: snake_case, camelCase / PascalCase past
    its first letter, a dotted name, or digits inside."""
    if "_" in word.strip("_") or "." in word:
        return True
    if any(c.isdigit() for c in word):
        return True
    return any(c.isupper() for c in word[1:])


def query_terms(text: str) -> list[str]:
    """The query's exact-match terms: identifiers first (in order), then other words of
    four letters or more that are no stop words; at most MAX_TERMS, no repeats."""
    words = _WORD.findall(text)
    idents = [w for w in words if looks_like_identifier(w)]
    plain = [w for w in words if w not in idents and len(w) >= 4 and w.lower() not in _STOP]
    out: list[str] = []
    for w in idents + plain:
        if w not in out:
            out.append(w)
    return out[:MAX_TERMS]


def lexical_score(document: str, metadata: Mapping[str, Any], terms: Sequence[str]) -> float:
    """How well a row matches the terms exactly: a term (or a dotted term's last part)
    that is the chunk's name counts 3, one that is a part of its qualified name 2, a
    token of its text 1; identifiers count double (what the asker spelled on purpose),
    and a plain word counts only as the chunk's name."""
    index = LexicalIndex()
    index.add(
        "row", str(metadata.get("name") or ""), str(metadata.get("qualifiedName") or ""), document
    )
    return index.scores(terms).get("row", 0.0)


def fuse(
    vector_ids: Sequence[str], lexical: Mapping[str, float], k: int
) -> list[tuple[str, float]]:
    """The top ``k`` ids by reciprocal-rank fusion of the vector ranking (best first) and
    the lexical scores (rows with score > 0, ranked by score, ties by vector rank)."""
    vector_rank = {rid: i for i, rid in enumerate(vector_ids)}
    lexical_ranked = sorted(
        (rid for rid, s in lexical.items() if s > 0),
        key=lambda rid: (-lexical[rid], vector_rank.get(rid, len(vector_rank)), rid),
    )
    fused: dict[str, float] = {}
    for i, rid in enumerate(vector_ids):
        fused[rid] = fused.get(rid, 0.0) + 1.0 / (RRF_K + i + 1)
    for i, rid in enumerate(lexical_ranked):
        fused[rid] = fused.get(rid, 0.0) + 1.0 / (RRF_K + i + 1)
    order = sorted(fused, key=lambda rid: (-fused[rid], vector_rank.get(rid, 1 << 30), rid))
    return [(rid, fused[rid]) for rid in order[: max(0, k)]]


# ---------------------------------------------------------------------------- index
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
# A text token in more rows than this share (and COMMON_MIN_ROWS) is too common to count.
COMMON_SHARE = 0.02
COMMON_MIN_ROWS = 200
_PLACES = ("name", "qualified", "text")


class LexicalIndex:
    """Exact tokens of the served rows → their ids, by where the token stands (the chunk's
    name, its qualified name's parts, its text). Built once per truth computation, so a
    query's exact matches cost dictionary lookups, not a scan of the documents."""

    def __init__(self) -> None:
        self._postings: dict[str, dict[str, list[str]]] = {p: {} for p in _PLACES}
        self.rows = 0

    def add(self, row_id: str, name: str, qualified_name: str, document: str) -> None:
        self.rows += 1
        seen: set[tuple[str, str]] = set()
        qualified_parts = re.split(r"[.:#/]", qualified_name) if qualified_name else []
        for place, tokens in (
            ("name", [name] if name else []),
            ("qualified", qualified_parts),
            ("text", _TOKEN.findall(document)),
        ):
            for token in tokens:
                if token and (place, token) not in seen:
                    seen.add((place, token))
                    self._postings[place].setdefault(token, []).append(row_id)

    def common(self, postings: Sequence[str]) -> bool:
        """A text token in this many rows tells nothing (a stop word of this corpus)."""
        return len(postings) > max(COMMON_MIN_ROWS, COMMON_SHARE * self.rows)

    def scores(self, terms: Sequence[str]) -> dict[str, float]:
        """``lexical_score`` of every row matching a term, from the postings alone. A text
        match of a token that is in more than COMMON_SHARE of the rows is not counted."""
        # bench/query.py: plain words matched in text pulled natural-language questions
        # off their answers (recall@5 92 % -> 67 % on cobra); as exact names they do not.
        out: dict[str, float] = {}
        for term in terms:
            weight = 2.0 if looks_like_identifier(term) else 1.0
            parts = [p for p in re.split(r"[.:#/]", term) if p] or [term]
            leaf = parts[-1]
            best: dict[str, float] = {}
            if weight > 1:  # a plain word counts only as a chunk's exact name
                text = self._postings["text"].get(leaf, ())
                for rid in () if self.common(text) else text:
                    best[rid] = weight
                for rid in self._postings["qualified"].get(leaf, ()):
                    best[rid] = 2 * weight
            for rid in self._postings["name"].get(term, ()):
                best[rid] = 3 * weight
            for rid in self._postings["name"].get(leaf, ()):
                best[rid] = 3 * weight
            for rid, s in best.items():
                out[rid] = out.get(rid, 0.0) + s
        return out
