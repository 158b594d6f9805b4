"""A provider's batch cap remembered across sweeps: which batch size a lane starts at, the
configured size re-tried once a day (``RECHECK_S``) in case the cap was raised."""

import hashlib
from dataclasses import dataclass

RECHECK_S = 86_400.0


@dataclass(frozen=True)
class RememberedCap:
    cap: int
    learned_at: float
    evidence: str = ""


def provider_cap_key(provider: str, base_url: str, model: str) -> str:
    """One remote provider, as every process names it (its slots too: ``provider_slots``)."""
    raw = f"{provider}\n{base_url.rstrip('/')}\n{model}".encode()
    return hashlib.sha256(raw).hexdigest()


def starting_cap(
    remembered: RememberedCap | None, now: float, recheck_s: float = RECHECK_S
) -> int | None:
    """The cap a lane starts at: the remembered one while younger than ``recheck_s``;
    None (the configured batch size) when there is none, or it is due a re-check."""
    if remembered is None or remembered.cap < 1:
        return None
    if now - remembered.learned_at >= recheck_s:
        return None
    return remembered.cap
