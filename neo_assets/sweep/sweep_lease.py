"""The per-repo sweep lease, as the sweep's steps use it.

One run holds the repo's lease (key ``sweep:<tenant>/<repo>``, holder = the Dagster run
id, so every step of the run, in whatever process, is the same holder) from before its
first ledger write to after its census:

- ``repo_envelope`` takes it, waiting at most ``NEO_SWEEP_LEASE_WAIT_S``;
- each later step takes it again expecting the same epoch (a different epoch means
  another sweep held it in between: this run lost it);
- ``kb_embeddings`` renews it while embedding and checks it before every batch write;
- ``fence_census`` releases it; a failing step releases it; a killed process leaves it
  to expire after ``NEO_SWEEP_LEASE_TTL_S``.

A run that does not get the lease, or loses it, writes nothing more: every later step
passes a marker along and the sweep's outcome is ``skipped`` with
``deferredCauseCode = SWEEP_LEASE_HELD`` (another sweep of the same repo is doing the
work; it is not a failure, and nothing is scheduled by this run).
"""

from collections.abc import Mapping
from typing import Any

import pandas as pd

from neo_assets.core import codes
from neo_assets.core.leases import sweep_lease_key
from neo_assets.settings import Settings
from neo_assets.sources.envelope import ENVELOPE_COLUMNS
from neo_assets.store.leases import LeaseKeeper
from neo_assets.store.ledger import Ledger
from neo_assets.sweep.steps import CHUNK_COLUMNS, RepoContext

SWEEP_LEASE_HELD = codes.SWEEP_LEASE_HELD

# Where the lease travels between steps: DataFrame.attrs[...] / summary["envelope"][...].
LEASE_ATTR = "sweep_lease"


class StepLease:
    """The lease as one step of run ``run_id`` on ``ctx``'s repo holds it.

    ``upstream`` is what the previous step passed along (its DataFrame attrs, or the
    summary's ``envelope``): none in the first step, which waits for the key; the
    carried epoch in later steps, which must still be the key's epoch; a skip marker,
    which this step passes on without touching the ledger. ``last`` releases the lease
    when the step ends (a step that raises always releases it).
    """

    def __init__(
        self,
        ledger: Ledger,
        ctx: RepoContext,
        run_id: str,
        settings: Settings,
        *,
        upstream: Mapping[str, Any] | None = None,
        last: bool = False,
    ) -> None:
        carried = carried_lease(upstream or {})
        self._carried = carried
        self._upstream_skip = carried if carried is not None and not carried.get("held") else None
        first = carried is None
        expected = None if carried is None or self._upstream_skip else int(carried["epoch"])
        self.keeper = LeaseKeeper(
            ledger,
            sweep_lease_key(ctx.tenant_id, ctx.repo_slug),
            run_id,
            ttl_s=settings.sweep_lease_ttl_s,
            wait_s=settings.sweep_lease_wait_s if first else 0.0,
            expected_epoch=expected,
            release_on_exit=last,
        )
        self._entered = False

    @property
    def held(self) -> bool:
        """True while this step may write: it holds the lease and it is not about to expire."""
        return self._upstream_skip is None and self._entered and self.keeper.valid()

    @property
    def info(self) -> dict[str, Any]:
        if self._upstream_skip is not None:
            return dict(self._upstream_skip)
        info = lease_info(self.keeper)
        if self._carried is not None and info["held"]:
            # Still the run's lease: what the first step waited for is the story to tell.
            return {**self._carried, "held": True, "epoch": info["epoch"]}
        return info

    def check(self) -> None:
        """Raise ``LeaseLostError`` unless the step may still write (before each write)."""
        self.keeper.check()

    def __enter__(self) -> "StepLease":
        if self._upstream_skip is None:
            self.keeper.__enter__()
            self._entered = True
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._entered:
            self.keeper.__exit__(exc_type, exc, tb)


def lease_info(keeper: LeaseKeeper) -> dict[str, Any]:
    """What the next step (and the sweep's result) needs to know about the lease."""
    seen = keeper.seen
    other = seen.holder if seen is not None and seen.holder != keeper.holder else None
    return {
        "key": keeper.key,
        "held": keeper.held and not keeper.lost,
        "holder": keeper.holder,
        "epoch": keeper.epoch,
        "waitedS": round(keeper.waited_s, 3),
        # The other holder found on the first attempt (it held the key, or left it to expire).
        "otherHolder": other,
        "otherEpoch": seen.epoch if other is not None and seen is not None else None,
        "reason": keeper.reason,
        "code": None if keeper.held and not keeper.lost else SWEEP_LEASE_HELD,
    }


def carried_lease(attrs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The lease info an upstream step passed along (None when there is none)."""
    info = attrs.get(LEASE_ATTR)
    return dict(info) if isinstance(info, Mapping) else None


def skipped_envelope_frame(info: Mapping[str, Any]) -> pd.DataFrame:
    frame = pd.DataFrame(columns=list(ENVELOPE_COLUMNS))
    frame.attrs[LEASE_ATTR] = dict(info)
    return frame


def skipped_chunks_frame(info: Mapping[str, Any]) -> pd.DataFrame:
    frame = pd.DataFrame(columns=CHUNK_COLUMNS)
    frame.attrs[LEASE_ATTR] = dict(info)
    return frame


def skipped_summary(info: Mapping[str, Any], partial: Mapping[str, Any] | None = None) -> dict:
    """kb_embeddings' output when the run does not (or no longer) hold the lease;
    ``partial`` is the lane's summary when the lease was lost mid-embedding."""
    out: dict[str, Any] = {"counts": {}, "errors": [], "strikes": []}
    if partial is not None:
        out.update({k: v for k, v in partial.items() if k in ("counts", "generation", "revision")})
    out["envelope"] = {LEASE_ATTR: dict(info)}
    return out


def skipped_result(ctx: RepoContext, info: Mapping[str, Any]) -> dict[str, Any]:
    """The sweep's result when another sweep of the repo holds the lease."""
    return {
        "tenantId": ctx.tenant_id,
        "repoSlug": ctx.repo_slug,
        "outcome": codes.OUTCOME_SKIPPED,
        "revision": None,
        "counts": {},
        "deferredCauseCode": SWEEP_LEASE_HELD,
        "lease": dict(info),
    }


def lease_metadata(info: Mapping[str, Any]) -> dict[str, Any]:
    """Asset metadata for a step that wrote nothing because of the lease."""
    return {
        "sweep_lease": "skipped: "
        + (
            f"held by {info.get('otherHolder')}"
            if info.get("reason") != "lost"
            else "lost to another sweep"
        ),
        "deferred_cause_code": SWEEP_LEASE_HELD,
    }
