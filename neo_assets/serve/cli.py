"""`neo-assets serve`, `neo-assets mcp` and `neo-assets token issue|list|revoke`: the
agents' query service and its tenant tokens."""

import contextlib
import errno
import os
import socket
import time
from collections.abc import Iterator
from typing import Annotated, Any

import typer

from neo_assets.cli import common

TOKEN_ENV = "NEO_TOKEN"
# The most a request's line and headers may take (a bearer token is ~70 bytes).
MAX_HEAD_BYTES = 64 * 1024


@contextlib.contextmanager
def ledger_writes(settings: Any) -> Iterator[None]:
    """A ledger that refuses the write (a read-only file or database) is one line naming
    it and the fix, never a traceback; nothing was written."""
    import sqlalchemy as sa

    try:
        yield
    except sa.exc.OperationalError as exc:
        first = (str(exc.orig or exc).strip().splitlines() or ["refused"])[0]
        where = sa.engine.make_url(settings.store.resolved_ledger_url).render_as_string(
            hide_password=True
        )
        raise common.UsageError(
            f"the ledger at {where} refused the write ({first}): make it writable by this "
            "user (or point NEO_LEDGER_URL at one that is); nothing was changed"
        ) from None


def listen_problem(host: str, port: int) -> str | None:
    """Why the service could not listen on ``host:port`` (None: it can), found by binding
    a socket there and closing it at once, as uvicorn will bind it (SO_REUSEADDR), before
    anything heavy (store, ledger, provider) is opened."""
    address = f"{host}:{port}"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        return (
            f"cannot listen on {address}: the host does not resolve ({exc.strerror or exc}); "
            "set --host or NEO_SERVE_HOST to an address of this machine"
        )
    family, kind, proto, _name, sockaddr = infos[0]
    try:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(sockaddr)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return (
                f"cannot listen on {address}: another process is listening there; "
                "choose a free port with --port or NEO_SERVE_PORT (or stop that process)"
            )
        return (
            f"cannot listen on {address} ({exc.strerror or exc}); change --host / "
            "NEO_SERVE_HOST or --port / NEO_SERVE_PORT"
        )
    return None


def serve(
    host: Annotated[str | None, typer.Option(help="address to listen on")] = None,
    port: Annotated[int | None, typer.Option(min=1, max=65535, help="port")] = None,
) -> None:
    """The query service for agents: HTTP /v1/* and MCP at /mcp (runs until stopped)."""

    def go() -> int:
        import uvicorn

        overrides = {k: v for k, v in {"serve_host": host, "serve_port": port}.items() if v}
        settings = common.load_settings_or_usage(**overrides)
        problem = listen_problem(settings.serve.host, settings.serve.port)
        if problem is not None:  # before the store, the ledger and the provider open
            # One line, however narrow the terminal (a usage error, exit 2).
            common.err.print(
                f"[red]error:[/red] {problem}", markup=True, highlight=False, soft_wrap=True
            )
            raise typer.Exit(common.EXIT_USAGE)
        common.load_config()  # a broken tenants file is a usage error before binding
        from neo_assets.serve.app import build_app
        from neo_assets.serve.auth import configure_logging
        from neo_assets.serve.limits import guarded_protocol

        configure_logging()

        common.err.print(
            f"neo-assets serve: http://{settings.serve.host}:{settings.serve.port} "
            "(/v1/search, /v1/chunks/ID, /v1/repos, /healthz, MCP at /mcp)",
            highlight=False,
        )
        uvicorn.run(
            build_app(settings),
            host=settings.serve.host,
            port=settings.serve.port,
            log_level="info",
            timeout_graceful_shutdown=5,
            limit_concurrency=settings.serve.max_connections,
            # h11 caps a request's head (httptools reads any size, freezing the
            # service: docs/performance.md); past it, 400 at once. The guarded
            # protocol adds the header-read timeout and the per-address and pending
            # caps uvicorn lacks (serve/limits.py).
            http=guarded_protocol(settings.serve),
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
            ws="none",  # no websocket route: an upgrade would leave the guard
        )
        return common.EXIT_OK

    common.run(go, False)


def mcp() -> None:
    """The MCP server on stdio for one agent; its token comes from NEO_TOKEN."""

    def go() -> int:
        import anyio

        from neo_assets.serve.auth import configure_logging
        from neo_assets.serve.mcp_tools import build_mcp
        from neo_assets.serve.runtime import Runtime

        configure_logging()

        if not os.environ.get(TOKEN_ENV, "").strip():
            raise common.UsageError(
                f"{TOKEN_ENV} is not set: issue a token with `neo-assets token issue "
                f"--tenant T` and pass it to the MCP client's environment as {TOKEN_ENV}"
            )
        settings, _tenants = common.load_config()
        runtime = Runtime.open(settings)
        server = build_mcp(runtime, stdio_token=lambda: os.environ.get(TOKEN_ENV, "").strip())

        async def main() -> None:
            try:
                await server.run_stdio_async()
            finally:
                await runtime.aclose()

        anyio.run(main)
        return common.EXIT_OK

    common.run(go, False)


token_app = typer.Typer(help="Tenant API tokens of the query service.", no_args_is_help=True)


@token_app.command("issue")
def issue(
    tenant: Annotated[str, typer.Option(help="the tenant the token reads")],
    repo: Annotated[
        list[str] | None, typer.Option(help="only this repo (repeatable); default all")
    ] = None,
    name: Annotated[str, typer.Option(help="a label for `token list`")] = "",
    expires: Annotated[
        str | None,
        typer.Option(help="a life like 30d, 12h, 90m or 2w (default: until revoked)"),
    ] = None,
    as_json: common.JsonOpt = False,
) -> None:
    """Issue a token; it is printed once and stored only as a hash."""

    def go() -> int:
        from neo_assets.serve.rules.tokens import parse_life
        from neo_assets.serve.tokens import issue_token
        from neo_assets.services.handles import open_ledger

        settings, tenants = common.load_config()
        declared = tenants.tenant(tenant)
        if declared is None:
            raise common.UsageError(
                f"no tenant {tenant!r} in {tenants.path}; issue tokens for a declared tenant"
            )
        slugs = {r.slug for r in declared.repos}
        unknown = [r for r in repo or [] if r not in slugs]
        if unknown:
            raise common.UsageError(
                f"tenant {tenant!r} declares no repo {unknown[0]!r} "
                f"(its repos: {', '.join(sorted(slugs)) or 'none'})"
            )
        if len(name) > 200:
            raise common.UsageError("--name: at most 200 characters")
        try:
            life_s = parse_life(expires) if expires is not None else None
        except ValueError as exc:
            raise common.UsageError(str(exc)) from None
        with open_ledger(settings) as ledger, ledger_writes(settings):
            record, token = issue_token(ledger, tenant, list(repo or []), name, time.time(), life_s)
        doc = {
            "id": record.id,
            "token": token,
            "tenantId": record.tenant_id,
            "repos": list(record.repos),
            "name": record.name,
            "expiresAt": record.expires_at,
        }
        common.emit(doc, as_json)
        if not as_json:
            common.err.print(
                f"token {record.id} for {tenant}"
                + (f" (repos {', '.join(record.repos)})" if record.repos else " (all repos)")
                + ": shown once, keep it now",
                highlight=False,
            )
            # The token itself goes to stdout, alone, so `$(neo-assets token issue …)`
            # captures it.
            typer.echo(token)
        return common.EXIT_OK

    common.run(go, as_json)


@token_app.command("list")
def list_(
    as_json: common.JsonOpt = False,
) -> None:
    """The issued tokens (never the tokens themselves)."""

    def go() -> int:
        from neo_assets.serve.tokens import list_tokens
        from neo_assets.services.handles import open_ledger

        settings = common.load_settings_or_usage()
        with open_ledger(settings) as ledger:
            records = list_tokens(ledger)
        common.emit({"tokens": [r.public() for r in records]}, as_json)
        if not as_json:
            for r in records:
                common.err.print(
                    f"{r.id}  {r.tenant_id}  {','.join(r.repos) or '*'}  {r.name or '-'}  "
                    + ("revoked" if r.revoked_at is not None else "active"),
                    highlight=False,
                )
        return common.EXIT_OK

    common.run(go, as_json)


@token_app.command("revoke")
def revoke(
    token_id: Annotated[str, typer.Argument(metavar="ID", help="the id `token list` shows")],
    as_json: common.JsonOpt = False,
) -> None:
    """Revoke a token: it stops working at the next request."""

    def go() -> int:
        from neo_assets.serve.tokens import revoke_token
        from neo_assets.services.handles import open_ledger

        settings = common.load_settings_or_usage()
        with open_ledger(settings) as ledger, ledger_writes(settings):
            found = revoke_token(ledger, token_id, time.time())
        if not found:
            raise common.UsageError(f"no token {token_id!r}; `neo-assets token list` shows ids")
        common.emit({"id": token_id, "revoked": True}, as_json)
        if not as_json:
            common.err.print(f"token {token_id} revoked", highlight=False)
        return common.EXIT_OK

    common.run(go, as_json)


def register(app: typer.Typer) -> None:
    """Add ``serve``, ``mcp`` and the ``token`` group to ``app``."""
    app.command()(serve)
    app.command()(mcp)
    app.add_typer(token_app, name="token")
