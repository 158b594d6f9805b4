"""Who is asking: the bearer token checked against the ledger on every request (so a
revocation takes effect at once), refusals logged without the token, and the per-token
concurrency limit."""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from neo_assets.core import codes
from neo_assets.core.query.request import QueryInputError
from neo_assets.core.tokens import TokenRecord, token_id_of, verify
from neo_assets.store.ledger import Ledger
from neo_assets.store.tokens import token_record

log = logging.getLogger("neo_assets.serve")


def configure_logging() -> None:
    """One plain line per event on stderr (stdout is the MCP stdio channel)."""
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
}


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


def authenticate(ledger: Ledger, presented: str | None, *, where: str) -> TokenRecord:
    """The token's record, or QueryInputError (401). ``where`` names the request in the
    refusal log line, which carries the token's public id at most."""
    token_id = token_id_of(presented) if presented else None
    record = token_record(ledger, token_id) if token_id is not None else None
    verdict = verify(presented, {record.id: record} if record is not None else {})
    if verdict.record is None:
        code = verdict.code or codes.AUTH_UNKNOWN_TOKEN
        log.warning("refused %s: %s (token id %s)", where, code, token_id or "-")
        raise QueryInputError(code, _MESSAGES[code], "authorization", status=401)
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
