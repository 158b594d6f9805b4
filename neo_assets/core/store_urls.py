"""The address a ``NEO_CHROMA_URL`` names, one rule for the settings (refused at load)
and the store (which connects to it)."""

from typing import NamedTuple
from urllib.parse import urlparse


class ChromaAddress(NamedTuple):
    host: str
    port: int
    ssl: bool


def chroma_address(url: str) -> ChromaAddress:
    """``http(s)://host[:port]`` as an address (port 8000, or 443 over https, by default);
    ValueError naming the setting otherwise."""
    try:
        parsed = urlparse(url)
        port = parsed.port
    except ValueError:  # a port that is not a number
        parsed, port = None, None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"NEO_CHROMA_URL must look like http://host:port, got {url!r}")
    ssl = parsed.scheme == "https"
    return ChromaAddress(parsed.hostname, port or (443 if ssl else 8000), ssl)
