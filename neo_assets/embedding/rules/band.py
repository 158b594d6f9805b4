"""The band as plain data: how many tokens one input may cost and how they are counted,
and the rules about a provider's own limit (checked at first contact, named when it is
larger). Which band is in force for a provider is ``embedding/band.band_for``."""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from neo_assets.core import codes
from neo_assets.embedding.rules.lane import estimate_tokens

SOURCE_TOKENIZER = "tokenizer"  # the model's own limit, counted by its own tokenizer
SOURCE_CONFIGURED = "configured"  # NEO_EMBEDDING_CONTEXT_TOKENS, estimated from chars
SOURCE_SERVER = "server-tokenizer"  # NEO_EMBEDDING_CONTEXT_TOKENS, counted by the server
SOURCE_DISCOVERED = "discovered"  # the server's own limit, estimated from chars

TokenCounter = Callable[[Sequence[str]], list[int]]


# Tokens per UTF-8 byte are at most one for the tokenizers embedding servers run (BPE
# with byte fallback, WordPiece, SentencePiece), plus the model's added tokens around an
# input ([CLS]/[SEP], BOS/EOS; at most this many).
ADDED_TOKENS = 4


def token_bound(text: str) -> int:
    """An upper bound on ``text``'s tokens under any of those tokenizers: a text whose
    bound is within a limit cannot exceed it, so it need not be counted."""
    return len(text.encode("utf-8")) + ADDED_TOKENS


@dataclass(frozen=True)
class Band:
    """The per-input limit in force for one provider."""

    limit_tokens: int  # the provider's true limit per input (special tokens included)
    safety: float  # 1.0 when the model's own tokenizer counts; the margin otherwise
    source: str
    chars_per_token: float
    counter: TokenCounter | None = None  # exact counts, or None: estimated from chars

    @property
    def tokens(self) -> int:
        """The largest count admitted: the limit, under the margin when estimated."""
        return max(1, math.floor(self.limit_tokens * self.safety))

    @property
    def exact(self) -> bool:
        return self.counter is not None

    def count(self, texts: Sequence[str]) -> list[int]:
        """Each text's tokens: the model's count, else the character estimate. (A server's
        counter answers a text too short to be over the band with its bound, unasked.)"""
        if self.counter is not None:
            return list(self.counter(texts))
        return [estimate_tokens(t, self.chars_per_token) for t in texts]

    def fits(self, text: str) -> bool:
        return self.count([text])[0] <= self.tokens

    def describe(self) -> dict[str, object]:
        """What receipts and the summary say about the band (no text, no callables)."""
        return {
            "bandTokens": self.tokens,
            "limitTokens": self.limit_tokens,
            "source": self.source,
            "counted": {SOURCE_TOKENIZER: "tokenizer", SOURCE_SERVER: "server"}.get(
                self.source, "estimate"
            ),
            "charsPerToken": self.chars_per_token,
        }


SETTING_CONTEXT_TOKENS = "NEO_EMBEDDING_CONTEXT_TOKENS"


@dataclass(frozen=True)
class ProviderLimit:
    """What a server says one input may cost, and where it said so."""

    tokens: int
    source: str  # e.g. "llama.cpp /props default_generation_settings.n_ctx"


class BandOverProviderLimitError(ValueError):
    """The band assumes more tokens per input than the provider takes."""

    code = codes.KB_VECTOR_EMBED_BAND_OVER_PROVIDER_LIMIT

    def __init__(self, provider: str, band: Band, limit: ProviderLimit) -> None:
        self.limit = limit
        super().__init__(
            f"{SETTING_CONTEXT_TOKENS}={band.limit_tokens} but the {provider} provider takes "
            f"{limit.tokens} tokens per input ({limit.source}): set "
            f"{SETTING_CONTEXT_TOKENS}={limit.tokens} (or raise the server's limit)"
        )


@dataclass(frozen=True)
class Discovery:
    """What one contact with a provider found, as the ledger keeps it: its limit per
    input (None: it does not say) and the tokenizer that counts its way (an endpoint name
    of ``embedding/server_tokens.ENDPOINTS``, ``bundled`` for the in-process model, None:
    nothing counts, the estimate applies)."""

    limit_tokens: int | None
    source: str
    tokenizer: str | None
    # Learned from the provider's size refusals (``learn_from_refusals``), kept while the
    # server says the same: a smaller limit it named, and the characters per token of the
    # estimate where nothing counts (None: none learned; the configured estimate).
    learned_limit: int | None = None
    chars_per_token: float | None = None

    @property
    def effective_limit(self) -> int | None:
        """The limit in force: what the server said, or less when a refusal named less."""
        said = [t for t in (self.limit_tokens, self.learned_limit) if t is not None]
        return min(said) if said else None


TOKENIZER_BUNDLED = "bundled"


def discovery_changed(recorded: Discovery | None, found: Discovery | None) -> bool:
    """Whether a contact's findings replace the recorded ones: something was found and it
    differs in limit or tokenizer (a server restarted with another context is a new
    generation). A contact that found nothing (the server is down, or says nothing)
    keeps what was recorded."""
    if found is None:
        return False
    if recorded is None:
        return True
    return (found.limit_tokens, found.tokenizer) != (recorded.limit_tokens, recorded.tokenizer)


@dataclass(frozen=True)
class SizeRefusal:
    """What one size refusal of one input said (from its fence receipt; no text)."""

    chars: int
    input_tokens: int | None  # the count the server named ("input (902 tokens)")
    limit_tokens: int | None  # the limit the server named


# A learned estimate keeps this share of what the refused inputs showed, so the re-split
# lands under the limit rather than on it.
LEARNED_MARGIN = 0.9


def learn_from_refusals(
    found: Discovery | None,
    limit_tokens: int,
    exact: bool,
    chars_per_token: float,
    refusals: Sequence[SizeRefusal],
) -> Discovery | None:
    """What size refusals teach about a provider, as the discovery to record; None when they
    teach nothing and the refused inputs stay fenced (docs/design/embedding.md#band)."""
    if not refusals:
        return None
    base = found or Discovery(None, "configured", None)
    named = [r.limit_tokens for r in refusals if r.limit_tokens and r.limit_tokens < limit_tokens]
    if named:
        return replace(base, learned_limit=min(named))
    if exact:
        return None
    ratios = [
        r.chars / max(r.input_tokens or 0, (r.limit_tokens or limit_tokens) + 1)
        for r in refusals
        if r.chars > 0
    ]
    if not ratios:
        return None
    cpt = round(min(ratios) * LEARNED_MARGIN, 3)
    if cpt >= chars_per_token or cpt <= 0:
        return None
    return replace(base, chars_per_token=cpt)


def discovered_limit(
    configured_tokens: int, band_set: bool, found: Discovery | None
) -> tuple[int, bool]:
    """The band's limit and whether it is the server's own: ``NEO_EMBEDDING_CONTEXT_TOKENS``
    when set (an override), else the recorded discovery's limit, else the configured
    default."""
    limit = found.effective_limit if found is not None else None
    if band_set or limit is None:
        return configured_tokens, False
    return limit, True


def counting_tokenizer(mode: str, found: Discovery | None) -> str | None:
    """Which server tokenizer counts inputs under ``NEO_EMBEDDING_TOKENIZER`` (``auto``:
    the recorded one, when the server has one; ``estimate``: none; ``server``: the
    recorded one, else the counter finds it itself, ``""``)."""
    if mode == "estimate":
        return None
    recorded = (
        found.tokenizer if found is not None and found.tokenizer != TOKENIZER_BUNDLED else None
    )
    if mode == "server":
        return recorded or ""
    return recorded


def headroom_notice(band: Band, limit: ProviderLimit | None) -> str | None:
    """What to say when the server takes more per input than the band assumes: the band
    stays (it is in the generation, computed without the network), and raising
    ``NEO_EMBEDDING_CONTEXT_TOKENS`` to the server's limit makes a new generation that
    re-offers what the narrower band split or fenced."""
    if limit is None or limit.tokens <= band.limit_tokens:
        return None
    return (
        f"the server takes {limit.tokens} tokens per input ({limit.source}) but the band is "
        f"{band.limit_tokens}: set {SETTING_CONTEXT_TOKENS}={limit.tokens} to use it (a new "
        "generation: what the band split or fenced is offered again)"
    )


def check_band(provider_name: str, band: Band, limit: ProviderLimit | None) -> None:
    """Raise ``BandOverProviderLimitError`` when ``band`` assumes more than ``limit``."""
    if limit is not None and band.limit_tokens > limit.tokens:
        raise BandOverProviderLimitError(provider_name, band, limit)
