"""A sweep's provider is prepared before its chunk stage and closed on every path."""

from neo_assets.embedding.lifecycle import close_provider, prepare


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


def test_close_provider_closes_it_and_twice_is_harmless() -> None:
    provider = Recording()
    close_provider(provider)
    assert provider.closed == 1
    close_provider(provider)
    assert provider.closed == 2
