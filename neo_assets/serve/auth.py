"""Who is asking: the bearer token checked against the ledger on every request (so a
revocation takes effect at once), refusals logged without the token, and the per-token
concurrency limit."""

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from neo_assets.core import codes
from neo_assets.query.rules.request import QueryInputError
from neo_assets.serve.rules.tokens import TokenRecord, token_id_of, verify
from neo_assets.serve.tokens import revoke_tenant_tokens, token_record
from neo_assets.store.ledger import Ledger

log = logging.getLogger("neo_assets.serve")


class NoQueryStrings(logging.Filter):
    """uvicorn's access lines without the query string: a token sent there by mistake (and
    refused) never reaches the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], args[2].split("?", 1)[0], *args[3:])
        return True


def configure_logging() -> None:
    """One plain line per event on stderr (stdout is the MCP stdio channel); access lines
    never carry a query string."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, NoQueryStrings) for f in access.filters):
        access.addFilter(NoQueryStrings())
    if any(getattr(h, "_neo_serve", False) for h in log.handlers):
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler._neo_serve = True  # type: ignore[attr-defined]  # noqa: SLF001
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


_MESSAGES = {
    codes.AUTH_MISSING_TOKEN: "no token: send 'Authorization: Bearer <token>' "
    "(issue one with `neo-assets token issue --tenant T`)",
    codes.AUTH_UNKNOWN_TOKEN: "unknown token: issue one with `neo-assets token issue --tenant T`",
    codes.AUTH_REVOKED_TOKEN: "this token was revoked: issue a new one with "
    "`neo-assets token issue --tenant T`",
    codes.AUTH_EXPIRED_TOKEN: "this token has expired: issue a new one with "
    "`neo-assets token issue --tenant T [--expires 30d]`",
}
_TENANT_GONE = (
    "this token's tenant is no longer declared, so the token was revoked; a tenant declared "
    "again under that id needs a new token (`neo-assets token issue --tenant T`)"
)


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


def authenticate(
    ledger: Ledger,
    presented: str | None,
    *,
    where: str,
    declared: Callable[[str], bool] | None = None,
) -> TokenRecord:
    """The token's record, or QueryInputError (401). ``where`` names the request in the
    refusal log line, which carries the token's public id at most. A token whose tenant
    ``declared`` says is gone is revoked for good, then refused."""
    token_id = token_id_of(presented) if presented else None
    record = token_record(ledger, token_id) if token_id is not None else None
    now = time.time()
    verdict = verify(presented, {record.id: record} if record is not None else {}, now)
    if verdict.record is None:
        code = verdict.code or codes.AUTH_UNKNOWN_TOKEN
        log.warning("refused %s: %s (token id %s)", where, code, token_id or "-")
        raise QueryInputError(code, _MESSAGES[code], "authorization", status=401)
    if declared is not None and not declared(verdict.record.tenant_id):
        revoke_tenant_tokens(ledger, [verdict.record.tenant_id], now)
        log.warning("refused %s: tenant removed (token id %s)", where, token_id)
        raise QueryInputError(codes.AUTH_REVOKED_TOKEN, _TENANT_GONE, "authorization", status=401)
    return verdict.record


def refuse_logged(record: TokenRecord, exc: QueryInputError, *, where: str) -> None:
    if exc.status in (403, 429):
        log.warning(
            "refused %s: %s (token id %s, tenant %s)", where, exc.code, record.id, record.tenant_id
        )


class TokenLimiter:
    """At most ``limit`` requests of one token at once; the next is refused (429) rather
    than queued, so one agent cannot starve the rest. One event loop: no lock needed."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._active: dict[str, int] = {}

    @asynccontextmanager
    async def slot(self, token_id: str) -> AsyncIterator[None]:
        active = self._active.get(token_id, 0)
        if active >= self.limit:
            raise QueryInputError(
                codes.QUERY_TOO_MANY_REQUESTS,
                f"this token already has {active} requests running (the limit is "
                f"{self.limit}, NEO_SERVE_PER_TOKEN_CONCURRENCY): wait for one to finish",
                None,
                status=429,
            )
        self._active[token_id] = active + 1
        try:
            yield
        finally:
            left = self._active[token_id] - 1
            if left:
                self._active[token_id] = left
            else:
                del self._active[token_id]
