"""The per-token concurrency limit: the request past the limit is refused, not queued."""

import anyio
import pytest

from neo_assets.core.query.request import QueryInputError
from neo_assets.serve.auth import TokenLimiter, bearer


def test_a_token_past_its_limit_is_refused_and_others_are_not():
    limiter = TokenLimiter(2)

    async def go() -> list[int]:
        refused: list[int] = []
        async with limiter.slot("a"), limiter.slot("a"):
            with pytest.raises(QueryInputError) as err:
                async with limiter.slot("a"):
                    pass
            refused.append(err.value.status)
            async with limiter.slot("b"):  # another token still gets in
                pass
        async with limiter.slot("a"):  # freed again
            pass
        return refused

    assert anyio.run(go) == [429]
    assert limiter._active == {}  # noqa: SLF001


def test_bearer_header_parsing():
    assert bearer("Bearer abc") == "abc"
    assert bearer("bearer   abc ") == "abc"
    assert bearer("Basic abc") is None and bearer("") is None and bearer("Bearer ") is None
