"""The lane's state and the types its parts share: one request's ``Outcome``, the ``Stop``
that ends the lane, what every input is (embedded, fenced, deferred, writing)."""

import asyncio
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from neo_assets.embedding.cancel import CancelScope
from neo_assets.embedding.failures import as_embed_failure, failure_cause
from neo_assets.embedding.lane_memory import BatchCapMemory, FenceBook
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.embedding.provider_slots import LocalSlots, Slots
from neo_assets.embedding.rules.lane import FenceRecord, LaneItem, LaneSettings, StrikeRecord
from neo_assets.embedding.slot_backend import slots_for
from neo_assets.sweep.rules.summary import zero_lane_counts

MAX_EVENT_ROWS = 200

WriteBatch = Callable[[list[LaneItem], np.ndarray], None]
Progress = Callable[[int, int, int], None]


@dataclass(frozen=True)
class Outcome:
    """One provider request's result: vectors, or a classified failure."""

    vectors: np.ndarray | None = None
    code: str | None = None
    status: int | None = None
    cause_code: str | None = None
    provider_code: str | None = None
    label: str = ""
    error: str = ""
    limit_tokens: int | None = None  # a size refusal's limit, when the provider named it
    control: bool = False  # a control/probe: its failure is the provider's, whatever the code
    alone: bool = False  # the only request in flight to the provider, its ceiling its own
    concurrent: bool = False  # other requests of this lane were in flight meanwhile
    detail: str = ""  # the provider's own bounded answer (a batch cap is read from it)

    @property
    def ok(self) -> bool:
        return self.vectors is not None

    def failure_details(self) -> dict[str, Any]:
        details: dict[str, Any] = {}
        if self.status is not None:
            details["status"] = self.status
        if self.error:
            details["error"] = self.error
        return details


class Stop(Exception):
    """Everything not yet resolved is deferred with ``code``; no later request starts."""

    def __init__(self, code: str, message: str, cause_code: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.cause_code = cause_code


class IsolationAborted(Exception):
    """A non-content failure inside an isolation: nothing more may be attributed."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.code or "")
        self.outcome = outcome


EMBEDDED = "embedded"
FENCED = "fenced"
DEFERRED = "deferred"
WRITING = "writing"


@dataclass(eq=False)
class LaneState:
    """What every part of the lane reads and updates: the provider and its slots, the
    work queues, the counts and rows of the summary."""

    provider: EmbeddingProvider
    settings: LaneSettings
    generation: str
    fence_book: FenceBook
    write_batch: WriteBatch
    cancel_scope: CancelScope
    clock: Callable[[], float]
    progress: Progress | None = None
    slots: Slots | None = None  # None: the provider's own (``slot_backend.slots_for``)
    width_known: bool = False  # a wrong width is not a first-contact configuration error
    batch_caps: BatchCapMemory | None = None  # the provider's remembered cap

    def __post_init__(self) -> None:
        self.lane_scope = self.cancel_scope.child("embed-lane")
        self.max_inflight = self.settings.max_inflight
        self._start_provider()
        self._start_accounting()
        self._start_work()

    def _start_provider(self) -> None:
        """The batch size (a cap named earlier), the provider's slots, what it drained."""
        provider, settings = self.provider, self.settings
        # A cap on inputs per request the provider named earlier: kept on the provider
        # object (this process) and remembered for the provider (every process).
        caps = [getattr(provider, "batch_cap", None), recalled_cap(self.batch_caps)]
        self.batch_size = min(
            [settings.batch_size, *(c for c in caps if isinstance(c, int) and c >= 1)]
        )
        # A remote provider is one server for every process; an in-process one (the
        # hashing embedder, sentence-transformers) is this process's own.
        endpoint = getattr(provider, "base_url", None)
        self.slots = self.slots or (
            slots_for(provider.name, str(endpoint), provider.model, self.max_inflight)
            if endpoint
            else LocalSlots(self.max_inflight)
        )
        self.inflight_now = 0
        self.serialized = False  # one request at a time after a deadline beside others
        # The abandoned-work count at the last drain: work abandoned before this sweep
        # started is the server's past (its requests long settled or cut by the ceiling).
        self.drained_seen: int | None = self.slots.abandoned_count()
        self.ever_answered = False

    def _start_accounting(self) -> None:
        """What the summary is made of: counts, each input's state, rows, strikes."""
        self.counts = zero_lane_counts()
        self.offered: list[LaneItem] = []
        self.item_ids: set[str] = set()
        self.state: dict[str, str] = {}
        self.prior_fence_rows: list[dict[str, Any]] = []
        self.fence_rows: list[dict[str, Any]] = []
        self.live_rows: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.strikes: dict[str, StrikeRecord] = {}
        self.struck_this_sweep: set[str] = set()
        self.awaiting_recovery: list[str] = []  # strikes whose recovery is not yet seen

    def _start_work(self) -> None:
        """The queues of work to send, what is in flight, and the write queue."""
        self.batches: deque[list[LaneItem]] = deque()
        self.suspects: deque[LaneItem] = deque()
        self.isolations: deque[list[LaneItem]] = deque()
        self.inflight: dict[asyncio.Task[Outcome], list[LaneItem]] = {}
        self.need_recovery: Outcome | None = None
        self.consecutive_failures = 0
        self.last_ok = False  # did the most recent settled request succeed?
        self.known_good: str | None = None  # shortest text embedded this sweep
        # An answer of the configured width came back (this sweep, or before it: the
        # generation's collection holds rows). Once known, a wrong width is the provider
        # changing underneath — the write path's dimension freeze — not a config error.
        self.width_confirmed = self.width_known
        self.internal_stop: Stop | None = None
        self.stop: Stop | None = None

        self.write_q: asyncio.Queue[tuple[list[LaneItem], np.ndarray] | None] = asyncio.Queue(
            maxsize=self.settings.write_queue_depth
        )
        self.write_failed = False
        self.total_batches = 0
        self.done_batches = 0
        self._fences: Mapping[str, FenceRecord] | None = None


def recalled_cap(memory: BatchCapMemory | None) -> int | None:
    if memory is None:
        return None
    try:
        return memory.recall()
    except Exception:  # noqa: BLE001 - an unreadable memory: the configured size stands
        return None


def failure_outcome(exc: BaseException, label: str) -> Outcome:
    failure = as_embed_failure(exc, operation_label=label)
    return Outcome(
        code=failure.code,
        status=failure.status,
        cause_code=failure_cause(exc),
        provider_code=failure.provider_code,
        label=label,
        error=type(exc).__name__,
        detail=failure.detail,
        limit_tokens=failure.limit_tokens,
    )
