"""A sweep's provider is prepared before its chunk stage and closed on every path."""

import pytest

from neo_assets.embedding.lifecycle import close_provider, closed_on_error, prepare


class Recording:
    name, model, dimensions = "rec", "rec-1", 4

    def __init__(self) -> None:
        self.prepared = 0
        self.closed = 0

    def prepare(self) -> None:
        self.prepared += 1

    async def embed(self, texts, cancel_scope, operation_label):  # pragma: no cover
        raise AssertionError("not embedded here")

    async def aclose(self) -> None:
        self.closed += 1


class WithoutStartUp(Recording):
    prepare = None  # a provider with nothing to start


def test_prepare_calls_the_providers_own_start_up() -> None:
    provider = Recording()
    prepare(provider)
    assert provider.prepared == 1 and provider.closed == 0


def test_prepare_is_a_no_op_for_a_provider_without_start_up() -> None:
    provider = WithoutStartUp()
    prepare(provider)
    assert provider.closed == 0


def test_an_error_in_the_block_closes_the_provider_and_goes_on() -> None:
    provider = Recording()
    with pytest.raises(ValueError, match="parse failed"), closed_on_error(provider):
        raise ValueError("parse failed")
    assert provider.closed == 1


def test_a_block_that_ends_well_leaves_the_provider_open_for_the_lane() -> None:
    provider = Recording()
    with closed_on_error(provider):
        pass
    assert provider.closed == 0
    close_provider(provider)
    assert provider.closed == 1
