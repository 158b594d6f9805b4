"""The MCP server: tools ``search_code``, ``get_chunk``, ``related_chunks``,
``list_repos`` over the same query service as HTTP. Over streamable HTTP the token is the
request's ``Authorization: Bearer`` header; over stdio it is NEO_TOKEN. Either way it is
checked on every call, so a revoked token stops working at once."""

from collections.abc import Callable
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata

from neo_assets.code_tools.rules import TOOLS, ToolSpec, input_schema
from neo_assets.core.query.request import QueryInputError, parse_search
from neo_assets.core.tokens import TokenRecord
from neo_assets.serve.auth import authenticate, bearer, refuse_logged
from neo_assets.serve.runtime import Runtime

INSTRUCTIONS = (
    "Search one tenant's code knowledge base: search_code finds chunks (functions, "
    "classes, sections) by meaning and by exact identifiers; get_chunk reads one by id; "
    "related_chunks follows its links; list_repos says which repos you may read. "
    "find_symbol finds definitions by name, find_references the lines that use a name, "
    "grep matches a regular expression line by line, read_file reads lines of a file and "
    "list_files lists a repo's files, all at the revision search_code answers from."
)


def for_mcp(message: str) -> str:
    """A refusal as an MCP client can act on it: the tool, not the HTTP route."""
    return message.replace("GET /v1/repos lists them", "the list_repos tool lists them")


class RawArguments(FuncMetadata):
    """A code tool's arguments handed over as the client sent them (one ``arguments``
    dict), so ``code_tools.rules.parse_args`` checks them exactly as HTTP's body is
    checked: ``"5"`` is refused as an integer on both, unknown fields too."""

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        return {"arguments": dict(arguments_to_validate)}


def add_code_tool(mcp: MCPServer, spec: ToolSpec, run: Callable[..., Any]) -> None:
    """Register ``run(arguments, ctx)`` as the tool ``spec`` declares: its published
    input schema and output schema are the declaration's (every argument described, ranges
    and enums), its arguments reach ``run`` unconverted."""
    mcp.add_tool(run, name=spec.name, description=spec.description)
    tool = mcp._tool_manager.get_tool(spec.name)  # the SDK has no public setter for these
    assert tool is not None
    old = tool.fn_metadata
    tool.fn_metadata = RawArguments(
        arg_model=old.arg_model,
        output_schema=spec.output,
        output_model=old.output_model,
        wrap_output=old.wrap_output,
    )
    tool.parameters = input_schema(spec)


def build_mcp(runtime: Runtime, stdio_token: Callable[[], str | None] | None = None) -> MCPServer:
    mcp = MCPServer(name="neo-assets", instructions=INSTRUCTIONS)

    def who(ctx: Context | None, tool: str) -> TokenRecord:
        headers = ctx.headers if ctx is not None else None
        presented = (bearer(headers.get("authorization")) if headers is not None else None) or (
            stdio_token() if stdio_token is not None and headers is None else None
        )
        return authenticate(
            runtime.resident.ledger,
            presented,
            where=f"mcp {tool}",
            declared=runtime.tenant_declared,
        )

    async def call(ctx: Context | None, tool: str, body: Callable[[TokenRecord], Any]) -> Any:
        record: TokenRecord | None = None
        try:
            record = await anyio.to_thread.run_sync(who, ctx, tool)
            async with runtime.limiter.slot(record.id):
                with anyio.fail_after(runtime.settings.serve.request_timeout_s):
                    return await body(record)
        except QueryInputError as exc:
            if record is not None:
                refuse_logged(record, exc, where=f"mcp {tool}")
            message = for_mcp(exc.message)
            raise ToolError(f"{exc.code} ({exc.field or '-'}): {message}") from None
        except TimeoutError:
            raise ToolError("QUERY_TIMEOUT: the request took too long; narrow it") from None

    svc = runtime.service

    @mcp.tool()
    async def search_code(
        query: str,
        k: int = 10,
        repo: str | None = None,
        path: str | None = None,
        language: str | None = None,
        kind: str | None = None,
        expand: bool = False,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """Find code chunks of your repos by meaning and exact identifiers. ``path`` is a
        glob over source paths (``src/**/*.py``); ``expand`` adds linked chunks."""
        body = {"query": query, "k": k, "expand": expand}
        body |= {
            key: value
            for key, value in {
                "repo": repo,
                "path": path,
                "language": language,
                "kind": kind,
            }.items()
            if value is not None
        }

        async def run(record: TokenRecord) -> Any:
            return await svc.search(record.tenant_id, parse_search(body), record.repos)

        return await call(ctx, "search_code", run)

    @mcp.tool()
    async def get_chunk(id: str, ctx: Context | None = None) -> dict[str, Any]:  # noqa: A002
        """One chunk by id: its text, path, line range and stamps."""

        async def run(record: TokenRecord) -> Any:
            return await anyio.to_thread.run_sync(svc.chunk, record.tenant_id, record.repos, id)

        return await call(ctx, "get_chunk", run)

    @mcp.tool()
    async def related_chunks(
        id: str,  # noqa: A002
        limit: int = 10,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        """The chunks linked to one chunk (similar code, files changed together)."""

        async def run(record: TokenRecord) -> Any:
            return await anyio.to_thread.run_sync(
                svc.related, record.tenant_id, record.repos, id, limit
            )

        return await call(ctx, "related_chunks", run)

    @mcp.tool()
    async def list_repos(ctx: Context | None = None) -> dict[str, Any]:
        """The repos your token may read, with their sweep state and freshness: the
        revision each is indexed at, whether its declared head has moved on since
        (behind: true / false, null for a plain directory), that head and since when."""

        async def run(record: TokenRecord) -> Any:
            return await anyio.to_thread.run_sync(svc.repos, record.tenant_id, record.repos)

        return await call(ctx, "list_repos", run)

    for spec in TOOLS.values():

        def tool_fn(name: str) -> Callable[..., Any]:
            async def code_tool(arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
                async def run(record: TokenRecord) -> Any:
                    return await anyio.to_thread.run_sync(
                        runtime.tools.call, name, record.tenant_id, record.repos, arguments
                    )

                return await call(ctx, name, run)

            return code_tool

        add_code_tool(mcp, spec, tool_fn(spec.name))

    return mcp
