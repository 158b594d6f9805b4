"""A big sweep's helpers start while its envelope reads; nothing started is left running."""

from pathlib import Path

import pytest

from neo_assets.concurrency.early_helpers import EarlyHelpers
from neo_assets.config.settings import load_settings
from neo_assets.config.tenants import load_tenants
from neo_assets.embedding.providers.hashing import HashingProvider
from neo_assets.services.sweep.steps import RepoContext
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


@pytest.fixture
def ctx(neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RepoContext:
    (tmp_path / "r").mkdir()
    tenants = write_tenants(tmp_path / "t.yaml", {"acme": [repo_entry("w", tmp_path / "r")]})
    monkeypatch.setenv("NEO_PARSE_WAVE_MIN_FILES", "50")
    t = load_tenants(tenants).tenants[0]
    return RepoContext(tenant=t, repo=t.repos[0])


def test_few_new_files_start_nothing(ctx: RepoContext) -> None:
    embedder = HashingProvider()
    early = EarlyHelpers(ctx, load_settings(), embedder)
    early.new_files(49)
    assert early.parser is None and embedder._worker is None
    early.close()


def test_many_new_files_start_both_helpers_and_the_parser_is_handed_on(
    ctx: RepoContext,
) -> None:
    embedder = HashingProvider()
    early = EarlyHelpers(ctx, load_settings(), embedder)
    early.new_files(50)
    early.new_files(500)  # once per sweep
    assert embedder._worker is not None
    parser = early.take_parser()
    assert parser is not None and early.take_parser() is None
    early.close()  # not the caller's parser: it stays up
    assert parser.helper.broken is None
    parser.close()
    assert parser.helper._proc.wait(timeout=10) is not None
    embedder._worker.close()


def test_a_parser_never_handed_on_is_closed(ctx: RepoContext) -> None:
    embedder = HashingProvider()
    early = EarlyHelpers(ctx, load_settings(), embedder)
    early.new_files(60)
    parser = early.parser
    assert parser is not None
    early.close()
    assert parser.helper.broken == "closed"
    assert parser.helper._proc.wait(timeout=10) is not None
    assert embedder._worker is not None
    embedder._worker.close()


def test_without_waves_only_the_embedder_starts_early(
    ctx: RepoContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEO_PARSE_WAVES", "false")
    embedder = HashingProvider()
    early = EarlyHelpers(ctx, load_settings(), embedder)
    early.new_files(500)
    assert early.parser is None and embedder._worker is not None
    embedder._worker.close()
