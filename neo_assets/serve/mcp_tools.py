"""The MCP server: tools ``search_code``, ``get_chunk``, ``related_chunks``, ``list_repos``
and the code tools, over the same query service and argument rules as HTTP, each with its
declared schemas (``serve/query_specs.py``, ``code_tools/rules/tools.py``). The token
(Bearer header, or NEO_TOKEN over stdio) is checked on every call."""

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata

from neo_assets.code_tools.rules.arguments import ToolSpec, check_args, input_schema, portable
from neo_assets.code_tools.rules.tools import TOOLS
from neo_assets.query.rules.request import QueryInputError, parse_search
from neo_assets.serve.auth import authenticate, bearer, refuse_logged
from neo_assets.serve.query_specs import SEARCH_TOOLS
from neo_assets.serve.rules.tokens import TokenRecord
from neo_assets.serve.runtime import Runtime

# What a tool runs under: the token checked, a slot held, the request timed.
Caller = Callable[[Context | None, str, Callable[[TokenRecord], Any]], Awaitable[Any]]

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
    dict), so ``code_tools.rules.tools.parse_args`` checks them exactly as HTTP's body is
    checked: ``"5"`` is refused as an integer on both, unknown fields too."""

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        return {"arguments": dict(arguments_to_validate)}


def add_declared_tool(mcp: MCPServer, spec: ToolSpec, run: Callable[..., Any]) -> None:
    """Register ``run(arguments, ctx)`` as the tool ``spec`` declares: its published
    input schema and output schema are the declaration's (every argument described, ranges
    and enums), its arguments reach ``run`` unconverted."""
    mcp.add_tool(run, name=spec.name, description=spec.description)
    tool = mcp._tool_manager.get_tool(spec.name)  # the SDK has no public setter for these
    assert tool is not None
    old = tool.fn_metadata
    tool.fn_metadata = RawArguments(
        arg_model=old.arg_model,
        output_schema=portable(spec.output),
        output_model=old.output_model,
        wrap_output=old.wrap_output,
    )
    tool.parameters = input_schema(spec)


def build_mcp(runtime: Runtime, stdio_token: Callable[[], str | None] | None = None) -> MCPServer:
    mcp = MCPServer(name="neo-assets", instructions=INSTRUCTIONS)
    call = authenticated_caller(runtime, stdio_token)
    add_search_tools(mcp, runtime, call)
    add_code_tools(mcp, runtime, call)
    return mcp


def authenticated_caller(runtime: Runtime, stdio_token: Callable[[], str | None] | None) -> Caller:
    """``call(ctx, tool, body)``: the caller's token checked, a slot held, the request
    timed; a refusal or a timeout becomes the tool's error."""

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

    return call


def add_search_tools(mcp: MCPServer, runtime: Runtime, call: Caller) -> None:
    """The search tools: ``search_code``, ``get_chunk``, ``related_chunks``, ``list_repos``."""
    svc = runtime.service

    async def search_code(record: TokenRecord, arguments: dict[str, Any]) -> Any:
        return await svc.search(record.tenant_id, parse_search(arguments), record.repos)

    def get_chunk(record: TokenRecord, arguments: dict[str, Any]) -> Any:
        args = check_args(SEARCH_TOOLS["get_chunk"], arguments)
        return svc.chunk(record.tenant_id, record.repos, args["id"])

    def related_chunks(record: TokenRecord, arguments: dict[str, Any]) -> Any:
        args = check_args(SEARCH_TOOLS["related_chunks"], arguments)
        return svc.related(record.tenant_id, record.repos, args["id"], args["limit"])

    def list_repos(record: TokenRecord, arguments: dict[str, Any]) -> Any:
        check_args(SEARCH_TOOLS["list_repos"], arguments)
        return svc.repos(record.tenant_id, record.repos)

    for answer in (search_code, get_chunk, related_chunks, list_repos):
        add_declared_tool(mcp, SEARCH_TOOLS[answer.__name__], _tool(call, answer.__name__, answer))


def add_code_tools(mcp: MCPServer, runtime: Runtime, call: Caller) -> None:
    """The code tools (``find_symbol``, ``grep``, ...), answered by ``runtime.tools``."""

    def answer(name: str) -> Callable[[TokenRecord, dict[str, Any]], Any]:
        return lambda record, arguments: runtime.tools.call(
            name, record.tenant_id, record.repos, arguments
        )

    for spec in TOOLS.values():
        add_declared_tool(mcp, spec, _tool(call, spec.name, answer(spec.name)))


def _tool(call: Caller, name: str, answer: Callable[..., Any]) -> Callable[..., Any]:
    """The MCP tool ``name``: ``answer(record, arguments)`` for the authenticated caller, in
    a worker thread unless it is a coroutine function."""

    async def tool(arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        async def run(record: TokenRecord) -> Any:
            if inspect.iscoroutinefunction(answer):
                return await answer(record, arguments)
            return await anyio.to_thread.run_sync(answer, record, arguments)

        return await call(ctx, name, run)

    return tool
