"""The seam: SERIAL parses exactly what the helpers do, in this process alone."""

from neo_assets.concurrency.parse_helper import ParseIdentity
from neo_assets.concurrency.speedups import SERIAL, Speedups
from neo_assets.embedding.providers.hashing import HashingProvider

IDENTITY = ParseIdentity("acme", "w", "neo-code", "1.0.0", 6000, 60)


def _files(n: int) -> list[tuple[str, str]]:
    return [(f"m{i}.py", f"def f{i}(x):\n    return x + {i}\n") for i in range(n)]


def test_serial_and_helped_parses_give_the_same_rows_in_the_same_order() -> None:
    files = _files(12)
    helped = Speedups(helper_min_files=4).parse(IDENTITY, iter(files), len(files))
    serial = SERIAL.parse(IDENTITY, iter(files), len(files))
    assert serial == helped and len(serial) == 12
    assert [r[1] for r in serial] == [p for p, _ in files]


def test_serial_starts_no_helper_for_the_provider() -> None:
    provider = HashingProvider()
    SERIAL.ready_provider(provider, files_to_parse=10_000)
    assert provider._worker is None
    Speedups(helper_min_files=100).ready_provider(provider, files_to_parse=99)
    assert provider._worker is None  # too few files to pay for it
    Speedups(helper_min_files=100).ready_provider(provider, files_to_parse=100)
    try:
        assert provider._worker is not None
    finally:
        import asyncio

        asyncio.run(provider.aclose())


def test_serial_parsing_starts_no_helper_process(monkeypatch) -> None:
    from neo_assets.concurrency import parse_helper

    started: list[str] = []
    real = parse_helper.HelperProcess

    def recording(module: str, *args: str):  # noqa: ANN202
        started.append(module)
        return real(module, *args)

    monkeypatch.setattr(parse_helper, "HelperProcess", recording)
    SERIAL.parse(IDENTITY, iter(_files(500)), 500)
    assert started == []
    Speedups(helper_min_files=200).parse(IDENTITY, iter(_files(500)), 500)  # the control
    assert started == ["neo_assets.concurrency.parse_helper"]
