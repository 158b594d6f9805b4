"""Fixtures of the health tests: one fault server for the package, an isolated NEO_HOME
whose provider is that server (OpenAI-compatible, 32 dimensions)."""

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from neo_assets.config.settings import Settings, load_settings
from neo_assets.store.ledger import Ledger
from neo_assets_tests.fakes.fixtures import fault_server_fixture
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor
from neo_assets_tests.kb_handles import KbHandles

DIM = 32
server_package = fault_server_fixture(scope="package", dimensions=DIM)


@pytest.fixture
def srv(server_package: FaultServerSupervisor) -> Iterator[FaultServerSupervisor]:
    """The shared server, answering normally; counters are cumulative (compare deltas)."""
    server_package.reset()
    server_package.wait_idle(timeout_s=20)
    yield server_package
    server_package.reset()


@dataclass
class HealthEnv:
    home: Path
    srv: FaultServerSupervisor
    monkeypatch: pytest.MonkeyPatch
    kb: KbHandles = field(default_factory=KbHandles)  # closed by the fixture

    def set(self, **leaves: object) -> None:
        """Set NEO_* leaves in the environment (``canary_timeout_ms=300``)."""
        for name, value in leaves.items():
            self.monkeypatch.setenv(f"NEO_{name.upper()}", str(value))

    @property
    def settings(self) -> Settings:
        return load_settings()

    @property
    def ledger(self) -> Ledger:
        return self.kb.ledger

    def requests(self) -> int:
        return int(self.srv.stats().get("requests_received", 0))

    def settle(self) -> dict:
        """Until the server holds no request and no connection: what a probe left behind."""
        return self.srv.wait_for(
            lambda s: s.get("open_requests") == 0 and s.get("open_connections") == 0,
            timeout_s=30,
            what="no open request or connection",
        )


@pytest.fixture
def env(
    neo_home: Path, srv: FaultServerSupervisor, monkeypatch: pytest.MonkeyPatch
) -> Iterator[HealthEnv]:
    health = HealthEnv(home=neo_home, srv=srv, monkeypatch=monkeypatch)
    health.set(
        embedding_provider="openai_compatible",
        embedding_base_url=srv.base_url,
        embedding_model="fake-embedder",
        embedding_dimensions=DIM,
    )
    yield health
    health.kb.close()
