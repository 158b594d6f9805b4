"""What a sweep starts before and beside its envelope, in the order that measured best.

One object for the sweep asset and for the benchmarks that run its stages without
Dagster (they had drifted apart when each wired this by hand):

- the helpers of a big first sweep boot while the envelope reads (concurrency/early_helpers.py;
  the envelope calls ``helpers.new_files``);
- the recorded generation is read once, for the presence listing and the chunk plan;
- the store opens and lists the repo's rows on a thread (concurrency/early_presence.py): at
  once when a generation is recorded (the listing overlaps the envelope), else after the
  envelope (``envelope_read``): on a first sweep, opening the client during the envelope
  competed with it for the GIL (~0.07 s of a first sweep of 2,000 files).
"""

import contextlib
from collections.abc import Callable

from neo_assets.concurrency.early_helpers import EarlyHelpers
from neo_assets.concurrency.early_presence import EarlyPresence
from neo_assets.config.settings import Settings
from neo_assets.core.ids.stamps import tenant_filter
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.services.sweep.steps import RecordedGeneration, RepoContext, recorded_generation
from neo_assets.store.chroma_store import ChromaStore
from neo_assets.store.ledger import Ledger


class SweepPrelude:
    """Close it (or use ``contextlib.closing``): it closes the helpers not handed on and
    waits for the listing thread."""

    def __init__(
        self,
        ctx: RepoContext,
        settings: Settings,
        ledger: Ledger,
        embedder: EmbeddingProvider,
        open_store: Callable[[], ChromaStore],
    ) -> None:
        self._stack = contextlib.ExitStack()
        self._ctx = ctx
        self._open_store = open_store
        self.helpers = self._stack.enter_context(
            contextlib.closing(EarlyHelpers(ctx, settings, embedder))
        )
        self.recorded: RecordedGeneration = recorded_generation(ctx, settings, ledger)
        self._presence = self._start_presence() if self.recorded.by_path else None

    def _start_presence(self) -> EarlyPresence[ChromaStore]:
        where = tenant_filter(self._ctx.tenant_id, self._ctx.repo_slug)
        presence = EarlyPresence(self._open_store, where, self.recorded.chunk_ids())
        return self._stack.enter_context(contextlib.closing(presence))

    def envelope_read(self) -> EarlyPresence[ChromaStore]:
        """Call once the envelope is read: the presence answers (started now if not yet)."""
        if self._presence is None:
            self._presence = self._start_presence()
        return self._presence

    def close(self) -> None:
        self._stack.close()
