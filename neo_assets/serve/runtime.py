"""What one service process keeps: settings, the resident handles, the query service,
the per-token limiter and the per-token stream guard, shared by the HTTP routes and the
MCP tools."""

from dataclasses import dataclass, field

from neo_assets.code_tools.service import CodeTools
from neo_assets.config.settings import Settings
from neo_assets.query.search import QueryService
from neo_assets.query.serving import Resident
from neo_assets.serve.auth import TokenLimiter
from neo_assets.serve.limits import StreamGuard
from neo_assets.services.handles import open_ledger, open_store


@dataclass
class Runtime:
    settings: Settings
    resident: Resident
    service: QueryService
    limiter: TokenLimiter
    streams: StreamGuard = field(init=False)
    tools: CodeTools = field(init=False)  # find_symbol, grep, read_file, ... (code_tools)

    def __post_init__(self) -> None:
        serve = self.settings.serve
        self.streams = StreamGuard(serve.streams_per_token, serve.stream_idle_s)
        self.tools = CodeTools(self.service, serve.grep_timeout_s)

    @classmethod
    def open(cls, settings: Settings) -> "Runtime":
        ledger = open_ledger(settings)
        try:
            store = open_store(settings)
        except BaseException:
            ledger.dispose()
            raise
        resident = Resident(settings, store, ledger)
        resident.tenants()  # a broken tenants file fails the start, not the first query
        return cls(
            settings,
            resident,
            QueryService(resident),
            TokenLimiter(settings.serve.per_token_concurrency),
        )

    def tenant_declared(self, tenant_id: str) -> bool:
        """Whether the tenants file in force declares ``tenant_id`` (a withheld,
        misdeclared tenant still counts: a typo revokes nothing)."""
        tenants = self.resident.tenants()
        return tenants.tenant(tenant_id) is not None or any(
            tid == tenant_id for tid, _slug in tenants.withheld
        )

    async def aclose(self) -> None:
        await self.resident.aclose()
        self.resident.store.close()
        self.resident.ledger.dispose()
