"""The chunk stage in waves, so parsing overlaps embedding and writing.

A sweep with many files to parse (a first sweep, a parser bump) would otherwise parse
them all before the first write. Here the files are parsed a wave at a time in the parse
helper (another process: the sweep's own process is busy inside Chroma's ``add``, which
holds the GIL), and each wave is declared in the ledger *before* it is handed to the
lane, so a row is never written before its declaration (reconciliation reads rows, then
declarations: an undeclared new row would read as stale content).

Between waves the declared generation is partly new: paths not yet reached keep their
recorded chunks (a changed path: its old declaration, whose rows are still present) or
have none (a first sweep, or a chunking change, which clears the generation with the
first wave). A path with no declaration is never a complete replacement, so its old rows
are kept; a crash between waves leaves exactly what the next sweep needs (paths whose
recorded blob differs are parsed again).

When the lane stops on its own (circuit, refusals, a write error) it still takes every
wave, so a deferred sweep leaves the whole generation declared, as the serial stage
does; an upstream abort ends the waves at the next one. No wave is declared after the
sweep's embedding stage has returned.
"""

from collections.abc import Iterator
from typing import Any

import pandas as pd

from neo_assets.concurrency.ahead import FirstAhead
from neo_assets.concurrency.parse_helper import READY_WAIT_S, Parser
from neo_assets.config.settings import Settings
from neo_assets.core import codes
from neo_assets.core.sweep.chunk_tally import ChunkTally
from neo_assets.core.sweep.waves import plan_waves
from neo_assets.services.sweep.steps import (
    CHUNK_COLUMNS,
    ChunkPlan,
    EnvelopeResult,
    RepoContext,
    chunks_frame,
    parse_identity,
    parsed_row_dicts,
    record_parsed,
)
from neo_assets.sources.envelope import read_texts
from neo_assets.store.ledger import Ledger

# How long a first wave started ahead waits for the parse helper to be ready.
AHEAD_READY_WAIT_S = 0.2


class ChunkingFailed(Exception):
    """A wave could not be parsed or declared: the sweep fails as a chunk stage would."""

    def __init__(self, message: str, code: str = codes.PARSE_FAILED) -> None:
        super().__init__(message)
        self.code = code


def many_to_parse(plan: ChunkPlan, settings: Settings) -> bool:
    """Enough files to parse (``NEO_PARSE_WAVE_MIN_FILES``, 200) that helper processes pay
    for their start-up (and waves for a declaration each)."""
    return len(plan.to_parse) >= settings.sweep.parse_wave_min_files


def pipelined(plan: ChunkPlan, settings: Settings) -> bool:
    """Whether this plan's chunk stage runs in waves (``NEO_PARSE_WAVES``)."""
    return settings.sweep.parse_waves and many_to_parse(plan, settings)


class ChunkWaves:
    """Iterate to parse and declare the plan's files wave by wave; each item is the
    declared wave's chunk frame. ``kept_frame`` is what needs no parsing,
    ``finished_tally`` what the UI shows of the whole generation once the waves are done.
    Close it (or use ``with``)."""

    def __init__(
        self,
        ctx: RepoContext,
        settings: Settings,
        ledger: Ledger,
        envelope: EnvelopeResult,
        plan: ChunkPlan,
        now: float,
        *,
        guard: Any = None,
        parser: Parser | None = None,
    ) -> None:
        self.ctx = ctx
        self.ledger = ledger
        self.envelope = envelope
        self.plan = plan
        self.now = now
        # Small enough that the first write starts early, big enough that a wave's
        # declaration (one ledger transaction) and presence check stay cheap.
        self.wave_files = settings.sweep.parse_wave_files
        self.first_wave_files = settings.sweep.parse_first_wave_files
        self.guard = guard  # raises to refuse a declaration (the sweep lease was lost)
        # Its helper may have started while the envelope was read (concurrency/early_helpers.py).
        self.parser = parser if parser is not None else Parser(parse_identity(ctx, settings))
        # What the UI shows of the generation, counted wave by wave: the rows themselves
        # (their text included) go to the lane and are not kept (the ledger has them).
        self.tally = ChunkTally(parsed_paths=len(plan.to_parse), reused_paths=len(plan.reused))
        self._kept_counted = False
        self.waves_declared = 0
        self.lost = False
        self._ahead: FirstAhead[pd.DataFrame] | None = None
        self._ahead_handed = False

    def kept_frame(self) -> pd.DataFrame:
        return chunks_frame([], self.plan.kept)

    def start_ahead(self) -> None:
        """Parse and declare the first wave now, on a thread (concurrency/ahead.py), while the
        caller does something else (Dagster records the envelope's materialization); the
        next ``iter`` continues from it. Declaring early is safe: it is guarded by the
        lease like every wave, and a sweep that stops after it leaves a generation
        declared in part, as a crash between waves does."""
        if self._ahead is None:
            # The wait is the generator's argument, not state its thread reads: that
            # thread's first step runs before this assignment could be seen.
            self._ahead = FirstAhead(
                self._waves(first_wait_s=AHEAD_READY_WAIT_S), name="first-wave-ahead"
            )

    def __iter__(self) -> Iterator[pd.DataFrame]:
        if self._ahead is not None and not self._ahead_handed:
            self._ahead_handed = True
            return self._ahead
        return self._waves(first_wait_s=0.0)

    def _waves(self, *, first_wait_s: float) -> Iterator[pd.DataFrame]:
        plan = self.plan
        waves = plan_waves(
            plan.to_parse,
            plan.replaced,
            full=plan.full,
            wave_files=self.wave_files,
            first_wave_files=self.first_wave_files,
        )
        for number, wave in enumerate(waves, start=1):
            wave_paths = list(wave.paths)
            files = list(read_texts(self.envelope.listing, wave_paths))
            try:
                if number == 1:
                    # Parsed here if the helper is still starting: the lane has nothing
                    # else to do until it is declared. Started ahead, this process is
                    # busy with Dagster's event meanwhile: the helper is waited for a
                    # little (it boots niced beside the envelope) before parsing here
                    # would compete with that event for the GIL.
                    rows, _helped = self.parser.parse(files, wait_ready_s=first_wait_s)
                elif number == 2:
                    # Nothing is written before the second wave is declared (the first
                    # write's lead, embed_step), and this process has nothing else to do
                    # meanwhile: both cores parse it.
                    rows, _helped = self.parser.parse_shared(files)
                else:
                    # Parsed in the helper while this process is inside a Chroma add.
                    rows, _helped = self.parser.parse(files, wait_ready_s=READY_WAIT_S)
            except Exception as exc:
                code = getattr(exc, "code", None)
                raise ChunkingFailed(
                    f"parsing {len(wave_paths)} file(s) from {wave_paths[0]!r} failed: {exc}",
                    code if isinstance(code, str) and code.isupper() else codes.PARSE_FAILED,
                ) from exc
            parsed = parsed_row_dicts(rows, plan.blob_of)
            if self.guard is not None:
                try:
                    self.guard()
                except Exception:  # noqa: BLE001 - the lease is lost: declare nothing more
                    self.lost = True
                    return  # the lane ends with what it has; the caller sees the lease
            replace = None if wave.replace is None else set(wave.replace)
            try:
                record_parsed(
                    self.ctx,
                    self.ledger,
                    self.envelope,
                    plan,
                    parsed,
                    replace,
                    self.now,
                    in_progress=number < len(waves),
                )
            except Exception as exc:
                raise ChunkingFailed(
                    f"declaring {len(parsed)} chunk(s) of {len(wave_paths)} file(s) in the "
                    f"ledger failed: {exc}",
                    codes.STORE_FAILED,
                ) from exc
            self.waves_declared += 1
            self.tally.add(parsed)
            yield pd.DataFrame(parsed, columns=[*CHUNK_COLUMNS, "blob"])

    def finished_tally(self) -> ChunkTally:
        """The whole generation's tally once the waves are done: the parsed rows, then the
        kept ones (the serial stage's order)."""
        if not self._kept_counted:
            self._kept_counted = True
            self.tally.add_declared(self.plan.kept)
        self.tally.waves = self.waves_declared
        return self.tally

    def close(self) -> None:
        if self._ahead is not None:
            self._ahead.close()  # a first wave still being computed uses the parser
        self.parser.close()

    def __enter__(self) -> "ChunkWaves":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
