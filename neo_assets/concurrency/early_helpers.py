"""Start a big sweep's helper processes while its envelope is still being read.

A helper takes ~0.3 s to boot. Started after the chunk plan, the parse helper was not
ready for the second wave, and the lane stalled at its first wave boundary (~0.3 s of a
first sweep of 2,000 files). The envelope knows much earlier how many files have content
it has never seen (``on_new_files``, before it reads them): when that many will need
parsing in waves, the parse helper and the embedder's helper start then, and boot while
the envelope reads the blobs. Whatever is started and not handed on is closed by
``close``.
"""

from neo_assets.concurrency.parse_helper import Parser
from neo_assets.config.settings import Settings
from neo_assets.embedding.lifecycle import prepare
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.services.sweep.steps import RepoContext, parse_identity


class EarlyHelpers:
    def __init__(self, ctx: RepoContext, settings: Settings, embedder: EmbeddingProvider) -> None:
        self.ctx = ctx
        self.settings = settings
        self.embedder = embedder
        self.parser: Parser | None = None
        self.started = False

    def new_files(self, count: int) -> None:
        """The envelope found ``count`` files with unseen content (``on_new_files``)."""
        if self.started or count < self.settings.sweep.parse_wave_min_files:
            return
        self.started = True
        prepare(self.embedder)
        if self.settings.sweep.parse_waves:
            self.parser = Parser(parse_identity(self.ctx, self.settings))

    def take_parser(self) -> Parser | None:
        """The started parser, now the caller's to close (None when none was started)."""
        parser, self.parser = self.parser, None
        return parser

    def close(self) -> None:
        parser, self.parser = self.parser, None
        if parser is not None:
            parser.close()
