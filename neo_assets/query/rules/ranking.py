"""Hybrid ranking: vector similarity fused (RRF) with exact identifier matches and BM25; the
parts of one unit answer as one result (the part with its signature); tests, docs and
examples below source unless asked for. Pure. Design: docs/design/query.md#ranking"""

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from neo_assets.sources.rules.definition_line import definition_line
from neo_assets.sources.rules.languages import FAMILY_CODE, FAMILY_PYTHON, language_of

RRF_K = 60
# Kinds of row with no signature line to answer as: a module's remainder, a text window,
# a doc section; a long one answers as the part that matched (its first holds no more).
_SIGNATURELESS_KINDS = frozenset({"module", "text", "section"})


@dataclass(frozen=True)
class RankingOptions:
    """Which ranking steps a search takes (the bench measures each one on and off)."""

    bm25: bool = False  # BM25 over chunk text (identifiers split) as a third list
    units: bool = False  # parts of one unit answer as one result: its first part
    source_prior: bool = False  # tests/docs/examples below source unless asked for
    # Each list's weight in the fusion (vector, exact names, BM25) and RRF's k.
    weights: tuple[float, float, float] = (1.0, 1.0, 1.0)
    rrf_k: int = RRF_K
    # The lists (0 vector, 1 names, 2 BM25) whose best row always keeps a place in the top
    # k: fusion alone drops a row one list is sure of when the others hold nothing on it.
    keep_first: tuple[int, ...] = ()
    keep_within: int = 5
    # Keep the vector list's best row only when its similarity leads the second's by this.
    keep_margin: float = 0.0


LEGACY = RankingOptions()
# The vector list's best row is kept in the top five when its cosine similarity leads the
# second's by this much: kept always, it cost the hashing embedder's train sets (router
# R@5, neo R@5 and R@10); at 0.05 (and 0.1) every train set is level or better.
KEEP_MARGIN = 0.05
# Every step on: each one was kept because it helped on the *train* split of the
# self-evaluation (bench/self_eval.py --split train: the older commit window, functions of
# the judged set left out), never chosen on the judged window (docs/performance.md).
DEFAULT_RANKING = RankingOptions(
    bm25=True, units=True, source_prior=True, keep_first=(0,), keep_margin=KEEP_MARGIN
)
# The variants bench/self_eval.py measures side by side, by name.
VARIANTS: dict[str, RankingOptions] = {
    "legacy": LEGACY,
    "units": RankingOptions(units=True),
    "prior": RankingOptions(source_prior=True),
    "bm25": RankingOptions(bm25=True),
    "units+prior": RankingOptions(units=True, source_prior=True),
    "all-but-keep": RankingOptions(bm25=True, units=True, source_prior=True),
    "all": DEFAULT_RANKING,
}
# At most this many query terms are looked up lexically (each costs one store read).
MAX_TERMS = 4
# A qualified name is dotted or, in Rust, C++, PHP and Ruby, joined by ``::`` (read as ``.``).
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z_][A-Za-z0-9_]*)*")
_STOP = frozenset(
    """a an and are as at be by do does for from how in is it of on or the this to what
    when where which who why with where's get set use used using code function class method
    file files return returns value values""".split()
)


def looks_like_identifier(word: str) -> bool:
    """A word a programmer would spell exactly: snake_case, camelCase / PascalCase past
    its first letter, a dotted name, or digits inside. An all-capitals word (JSON, HTTP)
    is an acronym of the prose: a plain word, which still matches a chunk of that name."""
    if "_" in word.strip("_") or "." in word:
        return True
    if word.isalpha() and word.isupper():
        return False
    if any(c.isdigit() for c in word):
        return True
    return any(c.isupper() for c in word[1:])


def names_a_source_file(word: str) -> bool:
    """``chain.rs``, ``utils.py``: a code file's name, its suffix spelled in lower case
    (``errgroup.Go`` and ``response.json`` are a method and a data file's suffix)."""
    suffix = word.rsplit(".", 1)[-1]
    return (
        "." in word
        and suffix.islower()
        and language_of(word).family in (FAMILY_CODE, FAMILY_PYTHON)
    )


def query_terms(text: str) -> list[str]:
    """The query's exact-match terms: identifiers first (in order), then other words of
    four letters or more that are no stop words; at most MAX_TERMS, no repeats."""
    words = [w.replace("::", ".") for w in _WORD.findall(text)]
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
        # BM25: term -> {row id: term frequency}, each row's length in tokens.
        self._tf: dict[str, dict[str, int]] = {}
        self._length: dict[str, int] = {}
        # Per repo: rows, their total length, and each token's row count (BM25's document
        # frequency) and each text token's, so a query's statistics are its scope's alone.
        self._repo_rows: dict[str, int] = {}
        self._repo_length: dict[str, int] = {}
        self._df: dict[str, dict[str, int]] = {}
        self._text_df: dict[str, dict[str, int]] = {}
        # Units stored as parts: (path, unit name) -> {part index: row id}.
        self._parts: dict[tuple[str, str], dict[tuple[int, ...], str]] = {}
        self._part_key: dict[str, tuple[str, str]] = {}
        self._defining: set[str] = set()  # parts holding their unit's signature line
        # Units of a _SIGNATURELESS_KINDS kind: each answers as its part that matched best.
        self._signatureless: set[tuple[str, str]] = set()
        # A function or method row -> the id of the class-like row holding it; Rust impl rows.
        self._block_of: dict[str, str] = {}
        self._impl_blocks: set[str] = set()
        self._heads: dict[str, str] | None = None
        self._best_heads: frozenset[str] = frozenset()
        self.secondary: set[str] = set()  # test / doc / example rows
        self._place: dict[str, tuple[str, int, str, str]] = {}

    def add(
        self,
        row_id: str,
        name: str,
        qualified_name: str,
        document: str,
        path: str = "",
        language: str = "",
        start_line: int = 0,
        repo: str = "",
        context: str = "",
        block: str = "",
        kind: str = "",
    ) -> None:
        self.rows += 1
        self._repo_rows[repo] = self._repo_rows.get(repo, 0) + 1
        self._place[row_id] = (path, start_line, name, row_id)
        if block:
            self._block_of[row_id] = block
        if _IMPL_BLOCK.search(name):
            self._impl_blocks.add(row_id)
        tokens = lexical_tokens(f"{name} {qualified_name} {context} {document}")
        counts: dict[str, int] = {}
        for token in tokens:
            counts[token] = counts.get(token, 0) + 1
        for token, n in counts.items():
            self._tf.setdefault(token, {})[row_id] = n
            by_repo = self._df.setdefault(token, {})
            by_repo[repo] = by_repo.get(repo, 0) + 1
        self._length[row_id] = len(tokens)
        self._repo_length[repo] = self._repo_length.get(repo, 0) + len(tokens)
        part = unit_part(name)
        if part is not None:
            key = (path, qualified_name or part[0])
            self._parts.setdefault(key, {})[part[1]] = row_id
            self._part_key[row_id] = key
            if kind in _SIGNATURELESS_KINDS:
                self._signatureless.add(key)
            elif definition_line(part[0], document) is not None:
                self._defining.add(row_id)
            self._heads = None
        if is_test_or_doc(path, language):
            self.secondary.add(row_id)
        seen: set[tuple[str, str]] = set()
        qualified_parts = re.split(r"[.:#/]", qualified_name) if qualified_name else []
        for place, tokens in (
            ("name", [name] if name else []),
            ("qualified", qualified_parts),
            ("text", _TOKEN.findall(f"{context} {document}")),
        ):
            for token in tokens:
                if token and (place, token) not in seen:
                    seen.add((place, token))
                    self._postings[place].setdefault(token, []).append(row_id)
                    if place == "text":
                        by_repo = self._text_df.setdefault(token, {})
                        by_repo[repo] = by_repo.get(repo, 0) + 1

    def place(self, row_id: str) -> tuple[str, int, str, str]:
        """Where a row stands (path, first line, name): the order of equal scores. Chunk
        ids change with the parser version and its rules digest; an order by id made a
        version switch that cuts the same chunks move the self-evaluation."""
        return self._place.get(row_id, ("", 0, "", row_id))

    def _in_scope(self, counts: Mapping[str, int], repos: Sequence[str] | None) -> int:
        if repos is None:
            return sum(counts.values())
        return sum(counts.get(repo, 0) for repo in repos)

    def common(self, token: str, repos: Sequence[str] | None = None) -> bool:
        """A text token in this many of the scope's rows tells nothing (a stop word of
        this corpus)."""
        rows = self._in_scope(self._repo_rows, repos)
        held = self._in_scope(self._text_df.get(token, {}), repos)
        return held > max(COMMON_MIN_ROWS, COMMON_SHARE * rows)

    def scores(self, terms: Sequence[str], repos: Sequence[str] | None = None) -> dict[str, float]:
        """``lexical_score`` of every row matching a term, from the postings alone. A text
        match of a token that is in more than COMMON_SHARE of the rows of ``repos`` (the
        query's scope; None: every repo) is not counted."""
        # Plain words matched in text pull natural-language questions off their answers
        # (bench/query.py; docs/performance.md); as exact names they do not.
        out: dict[str, float] = {}
        for term in terms:
            weight = 2.0 if looks_like_identifier(term) else 1.0
            parts = [p for p in re.split(r"[.:#/]", term) if p] or [term]
            if len(parts) > 1 and names_a_source_file(term):
                parts = parts[:-1]  # `chain.rs` asks for chain, not for every `.rs` module
            leaf = parts[-1]
            best: dict[str, float] = {}
            if weight > 1:  # a plain word counts only as a chunk's exact name
                text = self._postings["text"].get(leaf, ())
                for rid in () if self.common(leaf, repos) else text:
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

    @property
    def answers_as_best_part(self) -> frozenset[str]:
        """The heads (``unit_heads``' values) of units with no signature: each answers as
        its part that matched best (the part of a module holding what was asked)."""
        self.unit_heads  # noqa: B018  (computes both)
        return self._best_heads

    @property
    def unit_heads(self) -> dict[str, str]:
        """Each part's id -> the id of the part its unit answers as: the first served part
        holding the unit's signature line (a long doc comment above a Rust or Go function
        can fill part 1 alone), else its first part; none when that part is not served.
        And a Rust ``impl`` row holding one function -> that function's: the impl row is
        its header alone (``impl ToValue for Rc {}``), the function what is asked for."""
        if self._heads is None:
            heads: dict[str, str] = {}
            best: set[str] = set()
            for rid, key in self._part_key.items():
                parts = self._parts[key]
                defining = [i for i in sorted(parts) if parts[i] in self._defining]
                if defining:
                    head = parts[defining[0]]
                else:  # its first part, when served
                    first = min(parts)
                    head = parts[first] if set(first) == {1} else None
                if head is not None:
                    heads[rid] = head
                    if key in self._signatureless:
                        best.add(head)
            units: dict[str, set[str]] = {}
            for rid, block in self._block_of.items():
                if block in self._impl_blocks:
                    units.setdefault(block, set()).add(heads.get(rid, rid))
            for block, held in units.items():
                if len(held) == 1:
                    heads[block] = next(iter(held))
            self._heads = heads
            self._best_heads = frozenset(best)
        return self._heads

    def bm25(self, tokens: Sequence[str], repos: Sequence[str] | None = None) -> dict[str, float]:
        """BM25 (k1 1.2, b 0.75) of every row holding a query token, with the statistics
        (rows, mean length, document frequencies) of ``repos``, the query's scope (None:
        every repo), so a repo's ranking does not move with its tenant's other repos; a
        token in more than BM25_MAX_DF_SHARE of those rows is left out."""
        n = max(1, self._in_scope(self._repo_rows, repos))
        total = self._in_scope(self._repo_length, repos)
        average = total / n if total else 1.0
        out: dict[str, float] = {}
        for token in dict.fromkeys(tokens):
            postings = self._tf.get(token)
            df = self._in_scope(self._df.get(token, {}), repos)
            if not postings or not df or df > BM25_MAX_DF_SHARE * n:
                continue
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            for rid, tf in postings.items():
                norm = tf + BM25_K1 * (1 - BM25_B + BM25_B * self._length[rid] / average)
                out[rid] = out.get(rid, 0.0) + idf * tf * (BM25_K1 + 1) / norm
        return out


# ---------------------------------------------------------------------------- BM25
# Lexical ranking over the whole chunk text (name, qualified name, body), so a question
# that shares a plain word with a function's body ("maxsplit", "reference cycle") finds it,
# not only one that spells its name. Identifiers are split on case and underscores and kept
# whole too (``errors.Is`` -> errors.is, errors, is); short ones are kept.
BM25_K1 = 1.2
BM25_B = 0.75
# A term in more than this share of the rows ranks nothing (and costs a long posting walk).
BM25_MAX_DF_SHARE = 0.5
# A row scoring under this share of the best BM25 score is no lexical evidence: in RRF a
# deep rank still adds to every row the vector list also holds (set a priori; kept on the
# train split, docs/performance.md).
BM25_FLOOR = 0.25


def above_floor(scores: Mapping[str, float], share: float = BM25_FLOOR) -> dict[str, float]:
    """The BM25 scores at or above ``share`` of the best one."""
    if not scores:
        return {}
    floor = share * max(scores.values())
    return {rid: s for rid, s in scores.items() if s >= floor}


_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:(?:\.|::)[A-Za-z_$][A-Za-z0-9_$]*)*|\d+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_ENGLISH_STOP = frozenset(
    """a an and are as at be been but by can could did do does doing for from had has have
    he her his how i if in into is it its itself me more most my no nor not of off on once
    only or other our out over own same she should so some such than that the their them
    then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your also via instead just""".split()
)


def _stem(word: str) -> str:
    """A light plural fold: ``headers`` -> ``header``, ``retries`` -> ``retry``."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def lexical_tokens(text: str) -> list[str]:
    """Tokens of a text for BM25: each identifier lower-cased whole (dotted names whole and
    by part), and split on underscores and case changes; plural folded; repeats kept."""
    out: list[str] = []
    for word in _IDENT.findall(text):
        word = word.replace("::", ".")
        parts = word.split(".")
        if len(parts) > 1:
            out.append(word.lower())
        for part in parts:
            low = part.lower()
            out.append(_stem(low))
            pieces = [p for chunk in part.split("_") for p in _CAMEL.findall(chunk)]
            if len(pieces) > 1:
                out.extend(_stem(p.lower()) for p in pieces)
    return out


def query_tokens(text: str) -> list[str]:
    """The question's BM25 tokens: ``lexical_tokens`` without English stop words (a stop
    word spelled as an identifier, like ``Is`` in ``errors.Is``, is kept); no repeats."""
    out: list[str] = []
    for word in _IDENT.findall(text):
        word = word.replace("::", ".")
        kept = lexical_tokens(word)
        if "." not in word and not looks_like_identifier(word):
            kept = [t for t in kept if t not in _ENGLISH_STOP and len(t) > 1]
        for t in kept:
            if t not in out:
                out.append(t)
    return out


# ---------------------------------------------------------------------------- context
_IMPL_BLOCK = re.compile(r"(?:^|\.)impl ")  # neo-code's name of a Rust impl block


# ---------------------------------------------------------------------------- units
_PART_NAME = re.compile(r"^(.*) \[part (\d+)/(\d+)\]$")


def part_of(name: str) -> tuple[str, int] | None:
    """(unit name, part index) of a part's name ``<name> [part i/n]``, else None."""
    m = _PART_NAME.match(name)
    return (m.group(1), int(m.group(2))) if m else None


def unit_part(name: str) -> tuple[str, tuple[int, ...]] | None:
    """(unit name, position) of a part's name, every ``[part i/n]`` taken off: a unit the
    parser cut in two and the sweep cut again is ``f [part 2/2] [part 1/3]``, position
    (2, 1), after every part of ``f [part 1/2]``; else None."""
    position: list[int] = []
    m = _PART_NAME.match(name)
    while m:
        name = m.group(1)
        position.insert(0, int(m.group(2)))
        m = _PART_NAME.match(name)
    return (name, tuple(position)) if position else None


# Code under doc/ or docs/ can be source (cobra's doc/ package generates the docs), so a
# docs folder marks only its prose; tests, examples and benchmarks are secondary as code.
_SECONDARY_PATH = re.compile(
    r"(?:^|/)(?:tests?|testing|__tests__|spec|specs|e2e|examples?|benchmarks?|"
    r"fixtures?|testdata)/|(?:^|/)(?:test_[^/]*|[^/]*_test\.[a-z]+|[^/]*\.(?:test|spec)\.[a-z]+|"
    r"conftest\.py)$",
    re.IGNORECASE,
)
_PROSE_PATH = re.compile(r"\.(?:md|mdx|rst|txt|adoc|asciidoc)$", re.IGNORECASE)
_DOC_LANGUAGES = frozenset({"markdown", "rst", "text", "restructuredtext", "asciidoc"})
_ASKS_SECONDARY = re.compile(
    r"\b(?:tests?|testing|spec|specs|docs?|documentation|examples?|readme|changelog|"
    r"fixtures?|benchmarks?)\b",
    re.IGNORECASE,
)


def is_test_or_doc(path: str, language: str = "") -> bool:
    """A test, example or benchmark file (under such a folder, or named as a test file),
    or prose (Markdown, reST, text): docs. Code under a doc/ folder is source."""
    return (
        bool(_SECONDARY_PATH.search(path))
        or language.lower() in _DOC_LANGUAGES
        or bool(_PROSE_PATH.search(path))
    )


def asks_for_secondary(query: str) -> bool:
    """The question names tests, docs or examples itself."""
    return bool(_ASKS_SECONDARY.search(query))
