"""Pytest fixtures for the fault server, importable by any test module.

    from neo_assets_tests.fakes.fixtures import fault_server            # per test
    fault_server_mod = fault_server_fixture(scope="module", dimensions=32)  # shared

A shared (module-scoped) server must be reset to answering before each use
(``srv.reset()``), and its counters are cumulative: tests compare deltas
(``before = srv.stats()`` … ``srv.stats()``). ``fault_server_factory`` starts servers
with per-test options (``restart=False`` to watch one stay dead).
"""

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from neo_assets_tests.fakes.supervisor import FaultServerSupervisor


def fault_server_fixture(
    scope: str = "function", **options: Any
) -> Callable[..., Iterator[FaultServerSupervisor]]:
    """A pytest fixture yielding a started, supervised fault server (stopped at teardown).

    ``options`` go to ``FaultServerSupervisor`` (``dimensions``, ``restart``,
    ``restart_delay_s``, ``control``). With a wider scope, tests share one server: each
    test resets it (``srv.reset()``, usually in a small function-scoped fixture) and
    compares counter deltas.
    """

    @pytest.fixture(scope=scope)  # type: ignore[misc]
    def _fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultServerSupervisor]:
        state_dir = tmp_path_factory.mktemp("fault-server")
        with FaultServerSupervisor(state_dir, **options) as server:
            yield server

    return _fixture


fault_server = fault_server_fixture()


@pytest.fixture
def fault_server_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., FaultServerSupervisor]]:
    """A factory: ``start(**options)`` → a started server; all are stopped at teardown."""
    started: list[FaultServerSupervisor] = []

    def start(**options: Any) -> FaultServerSupervisor:
        server = FaultServerSupervisor(tmp_path_factory.mktemp("fault-server"), **options)
        started.append(server.start())
        return server

    yield start
    for server in started:
        server.stop()
