"""The default embedder's feature versions: v1 (every occurrence counted) stays byte for
byte what it was, so a store pinned to it keeps its vectors' meaning; v2 (the default)
counts a repeated feature as 1 + ln n."""

import asyncio
import hashlib

import numpy as np
import pytest

from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.providers.hash_features import hash_embed
from neo_assets.embedding.providers.hashing import HashingProvider, hashing_version

TEXT = (
    "def parse_header(line):\n"
    '    name, value = line.split(":", 1)\n'
    "    return name.strip(), value.strip()\n"
)
# sha256 of hash_embed(TEXT, 384) as v1 computed it before versions existed.
V1_DIGEST = "d81540dd253a9e3416af2abed58c0699023e36d714d328d64486b5ffbbfd1f18"


def test_v1_vectors_are_the_ones_it_always_made() -> None:
    assert hashlib.sha256(hash_embed(TEXT, 384, 1).tobytes()).hexdigest() == V1_DIGEST


def test_v2_counts_a_repeated_feature_sublinearly() -> None:
    # A chunk repeating one word 50 times: under v1 that word's bucket dominates the
    # vector, so it barely resembles the same chunk saying the word once; v2 keeps them near.
    once = "def render(page):\n    return template(page)\n"
    many = once + "\n".join(["    template(page)"] * 50)
    cos = {v: float(hash_embed(once, 384, v) @ hash_embed(many, 384, v)) for v in (1, 2)}
    assert cos[2] > cos[1] + 0.1, cos
    assert np.isclose(np.linalg.norm(hash_embed(many, 384, 2)), 1.0, atol=1e-5)
    with pytest.raises(ValueError, match="unknown hashing feature version 3"):
        hash_embed(TEXT, 384, 3)


@pytest.mark.parametrize(
    ("model", "version"),
    [("neo-hashing-v2", 2), ("neo-hashing-v1", 1), ("my-pinned-name", 1)],
)
def test_the_model_name_picks_the_features(model: str, version: int) -> None:
    assert hashing_version(model) == version
    provider = HashingProvider(dimensions=64, model=model)
    got = asyncio.run(provider.embed([TEXT], CancelScope(), "test"))
    assert np.array_equal(got[0], hash_embed(TEXT, 64, version))


def test_the_default_is_v2() -> None:
    assert HashingProvider().model == "neo-hashing-v2" and HashingProvider().version == 2
