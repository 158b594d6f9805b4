"""The one seam between a sweep's stages and what only makes them faster on two cores.

A stage asks its ``Speedups`` to parse files and to get the provider ready; what that
does (a parse helper taking half a big batch, the hashing embedder's helper started
before the files parse) is decided here, from settings. ``SERIAL`` does none of it: the
same chunks and vectors, on one core, with no child process — what a test that wants the
plain path uses. Where each mechanism was measured to pay: docs/performance.md.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from neo_assets.concurrency.parse_helper import ParseIdentity, Row, parse_files, parse_rows
from neo_assets.config.settings import Settings
from neo_assets.embedding.lifecycle import prepare
from neo_assets.embedding.provider import EmbeddingProvider


@dataclass(frozen=True)
class Speedups:
    # From this many files to parse, helper processes pay for their start-up (None: never).
    helper_min_files: int | None

    @classmethod
    def from_settings(cls, settings: Settings) -> "Speedups":
        return cls(helper_min_files=settings.sweep.helper_min_files)

    def parse(
        self, identity: ParseIdentity, files: Iterable[tuple[str, str]], count: int
    ) -> list[Row]:
        """The rows of the ``count`` files (path, text) ``files`` yields, in file order."""
        if self.helper_min_files is None:
            return parse_rows(identity, list(files))
        rows, _helped = parse_files(identity, files, count, help_min_files=self.helper_min_files)
        return rows

    def ready_provider(self, provider: EmbeddingProvider, files_to_parse: int) -> None:
        """Before a big chunk stage: let the provider start its helper while files parse."""
        if self.helper_min_files is not None and files_to_parse >= self.helper_min_files:
            prepare(provider)


SERIAL = Speedups(helper_min_files=None)
