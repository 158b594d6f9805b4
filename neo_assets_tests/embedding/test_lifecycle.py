"""A sweep's provider is closed on every path."""

from neo_assets.embedding.provider import close_provider


class Recording:
    name, model, dimensions = "rec", "rec-1", 4

    def __init__(self) -> None:
        self.closed = 0

    async def embed(self, texts, cancel_scope, operation_label):  # pragma: no cover
        raise AssertionError("not embedded here")

    async def aclose(self) -> None:
        self.closed += 1


def test_close_provider_closes_it_and_twice_is_harmless() -> None:
    provider = Recording()
    close_provider(provider)
    assert provider.closed == 1
    close_provider(provider)
    assert provider.closed == 2
