"""The hashing embedder's arithmetic: text to vector, numpy only. Its own module so the
helper process starts sooner, and provider and helper run the same code."""

import re
import zlib
from collections.abc import Sequence

import numpy as np

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_TOKEN_WEIGHT = 2.0
_NGRAM_WEIGHT = 1.0


def _identifier_tokens(text: str) -> list[str]:
    tokens: list[str] = []
    for ident in _IDENT.findall(text):
        tokens.append(ident.lower())
        for part in ident.split("_"):
            pieces = _CAMEL.findall(part)
            if len(pieces) > 1 or (pieces and pieces[0].lower() != ident.lower()):
                tokens.extend(p.lower() for p in pieces)
    return tokens


def hash_embed(text: str, dimensions: int) -> np.ndarray:
    """One L2-normalised float32 vector for ``text`` (all-zero only for empty text)."""
    vec = np.zeros(dimensions, dtype=np.float64)
    data = np.frombuffer(text.encode("utf-8", errors="replace"), dtype=np.uint8).astype(np.uint64)
    if data.size >= 3:
        # Vectorised byte 3-gram hash (FNV-like mix), sign from a high bit.
        h = (data[:-2] * np.uint64(16777619)) ^ (data[1:-1] * np.uint64(40503)) ^ data[2:]
        h = (h * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)
        idx = (h % np.uint64(dimensions)).astype(np.int64)
        sign = np.where((h >> np.uint64(31)) & np.uint64(1), -1.0, 1.0)
        vec += np.bincount(idx, weights=sign * _NGRAM_WEIGHT, minlength=dimensions)
    for token in _identifier_tokens(text):
        h = zlib.crc32(token.encode("utf-8"))
        vec[h % dimensions] += -_TOKEN_WEIGHT if (h >> 31) & 1 else _TOKEN_WEIGHT
    norm = float(np.linalg.norm(vec))
    if norm == 0.0:
        # An empty text still gets a valid (non-zero) vector: a fixed unit axis.
        vec[0] = 1.0
        norm = 1.0
    return (vec / norm).astype(np.float32)


def embed_texts(texts: Sequence[str], dimensions: int) -> np.ndarray:
    """``hash_embed`` of each text, stacked (shape ``(len(texts), dimensions)``)."""
    if not texts:
        return np.zeros((0, dimensions), dtype=np.float32)
    return np.vstack([hash_embed(t, dimensions) for t in texts])
