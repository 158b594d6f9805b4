"""The hashing embedder's arithmetic: text to vector, numpy only (the test fault server's
fake providers run the same code)."""

import re
import zlib
from collections.abc import Sequence

import numpy as np

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_TOKEN_WEIGHT = 2.0
_NGRAM_WEIGHT = 1.0
# Feature versions (the model name says which: ``hashing_version``). 1 counts every
# occurrence; 2 counts a feature seen n times as 1 + ln n, so the words a chunk repeats
# (self, return, its own name) stop drowning the ones that tell it apart.
VERSION_RAW = 1
VERSION_SUBLINEAR = 2
DEFAULT_VERSION = VERSION_SUBLINEAR


def _identifier_tokens(text: str) -> list[str]:
    tokens: list[str] = []
    for ident in _IDENT.findall(text):
        tokens.append(ident.lower())
        for part in ident.split("_"):
            pieces = _CAMEL.findall(part)
            if len(pieces) > 1 or (pieces and pieces[0].lower() != ident.lower()):
                tokens.extend(p.lower() for p in pieces)
    return tokens


def hash_embed(text: str, dimensions: int, version: int = DEFAULT_VERSION) -> np.ndarray:
    """One L2-normalised float32 vector for ``text`` (all-zero only for empty text), with
    the features of ``version``."""
    if version not in (VERSION_RAW, VERSION_SUBLINEAR):
        raise ValueError(f"unknown hashing feature version {version}")
    sublinear = version == VERSION_SUBLINEAR
    vec = np.zeros(dimensions, dtype=np.float64)
    data = np.frombuffer(text.encode("utf-8", errors="replace"), dtype=np.uint8).astype(np.uint64)
    if data.size >= 3:
        # Vectorised byte 3-gram hash (FNV-like mix), sign from a high bit.
        h = (data[:-2] * np.uint64(16777619)) ^ (data[1:-1] * np.uint64(40503)) ^ data[2:]
        h = (h * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)
        weights = np.full(h.shape, _NGRAM_WEIGHT)
        if sublinear:
            h, counts = np.unique(h, return_counts=True)
            weights = _NGRAM_WEIGHT * (1.0 + np.log(counts))
        idx = (h % np.uint64(dimensions)).astype(np.int64)
        sign = np.where((h >> np.uint64(31)) & np.uint64(1), -1.0, 1.0)
        vec += np.bincount(idx, weights=sign * weights, minlength=dimensions)
    tokens = _identifier_tokens(text)
    counted: dict[str, int] = {}
    for token in tokens:
        counted[token] = counted.get(token, 0) + 1
    for token, n in counted.items():
        h = zlib.crc32(token.encode("utf-8"))
        weight = _TOKEN_WEIGHT * ((1.0 + np.log(n)) if sublinear else n)
        vec[h % dimensions] += -weight if (h >> 31) & 1 else weight
    norm = float(np.linalg.norm(vec))
    if norm == 0.0:
        # An empty text still gets a valid (non-zero) vector: a fixed unit axis.
        vec[0] = 1.0
        norm = 1.0
    return (vec / norm).astype(np.float32)


def embed_texts(
    texts: Sequence[str], dimensions: int, version: int = DEFAULT_VERSION
) -> np.ndarray:
    """``hash_embed`` of each text, stacked (shape ``(len(texts), dimensions)``)."""
    if not texts:
        return np.zeros((0, dimensions), dtype=np.float32)
    return np.vstack([hash_embed(t, dimensions, version) for t in texts])
