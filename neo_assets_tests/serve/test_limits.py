"""The per-token concurrency limit: the request past the limit is refused, not queued."""

import anyio
import pytest

from neo_assets.query.rules.request import QueryInputError
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


def test_a_provider_refusal_of_the_question_is_the_askers_and_a_dead_provider_is_503():
    from neo_assets.core import codes
    from neo_assets.embedding.failures import EmbedFailure
    from neo_assets.query.answers import embed_refused

    too_long = embed_refused(
        EmbedFailure(codes.KB_VECTOR_EMBED_PROVIDER_REFUSAL, detail="300 tokens over 256")
    )
    assert (too_long.status, too_long.field) == (400, "query")
    assert "shorten" in too_long.message
    down = embed_refused(EmbedFailure(codes.KB_VECTOR_EMBED_TIMEOUT))
    assert down.status == 503 and down.code == codes.QUERY_UNAVAILABLE
