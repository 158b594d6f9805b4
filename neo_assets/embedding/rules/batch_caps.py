"""A provider's batch cap remembered across sweeps: which batch size a lane starts at.

A server that caps inputs per request (TEI's 413 "batch size 64 > maximum allowed batch
size 32") names the cap; the lane learns it from the body and the ledger keeps it for the
provider (kind, base URL, model). A later sweep starts at the remembered cap while it is
fresh. Once a day (``RECHECK_S``) the configured size is tried again: a server whose cap
was raised is then used at the configured size, and one still capped costs one refused
round (``max_inflight`` requests) before the cap is learned and remembered afresh. Never
re-checking would keep a raised server at the old cap for ever; checking every sweep is
what remembering saves.
"""

import hashlib
from dataclasses import dataclass

RECHECK_S = 86_400.0


@dataclass(frozen=True)
class RememberedCap:
    cap: int
    learned_at: float
    evidence: str = ""


def provider_cap_key(provider: str, base_url: str, model: str) -> str:
    """One remote provider, as every process names it."""
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
