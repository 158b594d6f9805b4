"""Each content embedded once per generation: a missing chunk whose exact input digest a row
already has at the generation copies that vector; one representative per distinct input
is sent. Pure: the store lookup is the caller's."""

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from neo_assets.embedding.rules.lane import LaneItem


def embedding_input_digest(text: str) -> str:
    """sha256 (hex) of the exact text sent to the provider for a chunk."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class ReusePlan:
    """``copy``: chunk id -> the digest whose stored vector it takes; ``send``: one item
    per distinct input no row has; ``followers``: a sent item's id -> the other missing
    chunk ids with the same input (they take its vector when it is written)."""

    copy: dict[str, str] = field(default_factory=dict)
    send: list[LaneItem] = field(default_factory=list)
    followers: dict[str, list[str]] = field(default_factory=dict)


def plan_reuse(
    items: Iterable[LaneItem], digest_of: Mapping[str, str], stored: Mapping[str, Any]
) -> ReusePlan:
    """Split ``items`` (the missing chunks) by whether ``stored`` (input digest -> a vector
    a row of the same generation, and tenant unless reuse across tenants is allowed, holds)
    already has their input; the rest are sent once per distinct digest."""
    plan = ReusePlan()
    leader_of: dict[str, str] = {}
    for item in items:
        digest = digest_of[item.chunk_id]
        if digest in stored:
            plan.copy[item.chunk_id] = digest
        elif digest in leader_of:
            plan.followers.setdefault(leader_of[digest], []).append(item.chunk_id)
        else:
            leader_of[digest] = item.chunk_id
            plan.send.append(item)
    return plan
