"""Which declared repos need their links computed again: the facts ``links.rules.due`` reads
(declared generation, stored link set, latest sweep), gathered from the ledger."""

from dataclasses import dataclass

from neo_assets.config.settings import Settings
from neo_assets.links.params import LinkParams
from neo_assets.links.rules.due import links_due_reason, links_run_key
from neo_assets.links.store import link_set
from neo_assets.store.ledger import Ledger
from neo_assets.sweep.context import RepoContext
from neo_assets.sweep.rules.summary import EMBEDDED, read_stored_summary


@dataclass(frozen=True)
class LinksDue:
    ctx: RepoContext
    reason: str | None  # None: the stored links are current
    run_key: str

    @property
    def key(self) -> str:
        return self.ctx.key


def _embedded(last_summary: object) -> int:
    """Rows the latest sweep wrote (0 when its summary is missing or torn)."""
    return read_stored_summary(last_summary).count(EMBEDDED)


def evaluate_links(ctxs: list[RepoContext], settings: Settings, ledger: Ledger) -> list[LinksDue]:
    params = LinkParams.from_settings(settings).as_dict()
    out = []
    for ctx in ctxs:
        generation = ledger.declared_generation(ctx.tenant_id, ctx.repo_slug)
        recorded_at = float(generation["recorded_at"]) if generation is not None else None
        stored = link_set(ledger, ctx.tenant_id, ctx.repo_slug)
        state = ledger.repo_state(ctx.tenant_id, ctx.repo_slug) or {}
        swept_at = state.get("last_attempt_at")
        reason = links_due_reason(
            generation_recorded_at=recorded_at,
            link_set=stored,
            params=params,
            last_sweep_at=swept_at,
            last_sweep_embedded=_embedded(state.get("last_summary")),
        )
        run_key = links_run_key(
            ctx.key, generation_recorded_at=recorded_at, link_set=stored, last_sweep_at=swept_at
        )
        out.append(LinksDue(ctx=ctx, reason=reason, run_key=run_key))
    return out
