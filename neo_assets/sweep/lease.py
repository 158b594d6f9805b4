"""The per-repo sweep lease, as the sweep's step uses it: held from before the first ledger
write to after the census; a run without it writes nothing more (``skipped``,
``codes.SWEEP_LEASE_HELD``). Design: docs/design/sweep.md#lease"""

from collections.abc import Mapping
from typing import Any

from neo_assets.config.settings import Settings
from neo_assets.core import codes
from neo_assets.store.leases import LeaseKeeper
from neo_assets.store.ledger import Ledger
from neo_assets.sweep.context import RepoContext
from neo_assets.sweep.rules.leases import sweep_lease_key
from neo_assets.sweep.rules.report import SweepReport


class SweepLease:
    """The repo's sweep lease as run ``run_id`` holds it for one step (released at exit)."""

    def __init__(self, ledger: Ledger, ctx: RepoContext, run_id: str, settings: Settings) -> None:
        self.keeper = LeaseKeeper(
            ledger,
            sweep_lease_key(ctx.tenant_id, ctx.repo_slug),
            run_id,
            ttl_s=settings.sweep.sweep_lease_ttl_s,
            wait_s=settings.sweep.sweep_lease_wait_s,
            release_on_exit=True,
        )
        self._entered = False

    @property
    def held(self) -> bool:
        """True while the step may write: it holds the lease and it is not about to expire."""
        return self._entered and self.keeper.valid()

    @property
    def info(self) -> dict[str, Any]:
        """What the next step (and the sweep's result) needs to know about the lease."""
        keeper = self.keeper
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
            "code": None if keeper.held and not keeper.lost else codes.SWEEP_LEASE_HELD,
        }

    def check(self) -> None:
        """Raise ``LeaseLostError`` unless the step may still write (before each write)."""
        self.keeper.check()

    def __enter__(self) -> "SweepLease":
        self.keeper.__enter__()
        self._entered = True
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._entered:
            self.keeper.__exit__(exc_type, exc, tb)


def skipped_result(ctx: RepoContext, info: Mapping[str, Any]) -> SweepReport:
    """The sweep's result when another sweep of the repo holds the lease."""
    return SweepReport(
        tenant_id=ctx.tenant_id,
        repo_slug=ctx.repo_slug,
        outcome=codes.OUTCOME_SKIPPED,
        revision=None,
        deferred_cause_code=codes.SWEEP_LEASE_HELD,
        lease=dict(info),
    )


def lease_metadata(info: Mapping[str, Any]) -> dict[str, Any]:
    """Asset metadata for a step that wrote nothing because of the lease."""
    return {
        "sweep_lease": "skipped: "
        + (
            f"held by {info.get('otherHolder')}"
            if info.get("reason") != "lost"
            else "lost to another sweep"
        ),
        "deferred_cause_code": codes.SWEEP_LEASE_HELD,
    }
