"""The store, the ledger and the provider, opened from settings for one caller, who closes
them. Nothing is cached; Chroma and the provider factory are imported when first needed,
so a caller needing neither starts quickly."""

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from neo_assets.config.settings import Settings
from neo_assets.embedding.provider import EmbeddingProvider
from neo_assets.store.ledger import Ledger
from neo_assets.store.private_files import private_dir, private_file

if TYPE_CHECKING:
    from neo_assets.store.chroma_store import ChromaStore
    from neo_assets.store.local_server import ServerPaths


class StoreUnreachable(RuntimeError):
    """The Chroma server or the ledger's database named by a setting cannot be reached:
    the message names the setting, the address (no password) and what to do."""

    def __init__(self, what: str, setting: str, address: str, cause: BaseException) -> None:
        first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
        super().__init__(
            f"{what} at {address} ({setting}) cannot be reached: {first}. Start it, or set "
            f"{setting} to one that is running (unset: the embedded one under NEO_HOME)."
        )


class LocalStoreFailed(StoreUnreachable):
    """The local Chroma server over NEO_HOME could not be started or reached."""

    def __init__(self, message: str) -> None:
        RuntimeError.__init__(self, message)


def local_server_paths(settings: Settings) -> "ServerPaths":
    from neo_assets.store.local_server import ServerPaths  # noqa: PLC0415

    return ServerPaths.under(settings.store.home_dir, settings.store.chroma_dir)


def store_url(settings: Settings) -> str | None:
    """The Chroma server this process talks to: NEO_CHROMA_URL, else the local server over
    the directory under NEO_HOME (started if none runs); None when embedded."""
    if settings.store.chroma_url:
        return settings.store.chroma_url
    if settings.store.chroma_local == "embedded":
        return None
    from neo_assets.store import local_server  # noqa: PLC0415

    try:
        return local_server.ensure_local_server(
            local_server_paths(settings), idle_s=settings.store.chroma_server_idle_s
        )
    except local_server.LocalServerError as exc:
        raise LocalStoreFailed(str(exc)) from None


def _hold_embedded(settings: Settings) -> Callable[[], None] | None:
    """An embedded open marks its directory (never beside a local server); its release."""
    if settings.store.chroma_url or settings.store.chroma_local != "embedded":
        return None
    from neo_assets.store import local_server  # noqa: PLC0415

    try:
        return local_server.hold_embedded(local_server_paths(settings))
    except local_server.LocalServerError as exc:
        raise LocalStoreFailed(str(exc)) from None


def open_store(settings: Settings) -> "ChromaStore":
    """The shared collection (NEO_CHROMA_URL's server, else the local server over the
    directory under NEO_HOME, or the directory itself when embedded). Close it
    (``close()``, or ``with``). An unreachable server: ``StoreUnreachable``."""
    from neo_assets.store.chroma_store import open_store as open_collection  # noqa: PLC0415

    url = store_url(settings)
    if url is None:  # embedded: the directory under NEO_HOME, made by this process
        private_dir(settings.store.chroma_dir)
    release = _hold_embedded(settings)
    try:
        store = open_collection(
            persist_dir=None if url else settings.store.chroma_dir,
            url=url,
            collection_name=settings.store.collection_name,
        )
    except BaseException as exc:
        if release is not None:
            release()
        if not url or not isinstance(exc, (ValueError, ConnectionError, OSError)):
            raise
        if not settings.store.chroma_url:
            raise StoreUnreachable("the local Chroma server", "NEO_HOME", url, exc) from exc
        raise StoreUnreachable("the Chroma server", "NEO_CHROMA_URL", url, exc) from exc
    if release is not None:
        store.on_close = release
    return store


def open_ledger(settings: Settings) -> Ledger:
    """The ledger (NEO_LEDGER_URL, else SQLite under NEO_HOME), migrated to the newest
    schema. Dispose of it (``dispose()``, or ``with``). A database server that cannot be
    reached: ``StoreUnreachable``."""
    url = settings.store.resolved_ledger_url
    if not settings.store.ledger_url:  # the SQLite file under NEO_HOME
        private_dir(settings.store.home_dir)
    try:
        ledger = Ledger.open(url)
        if not settings.store.ledger_url:
            for suffix in ("", "-wal", "-shm", "-journal"):
                private_file(settings.store.home_dir / f"ledger.sqlite{suffix}")
        return ledger
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
        if not settings.store.ledger_url:
            raise  # the embedded SQLite file: not a server that is down
        address = sa.engine.make_url(url).render_as_string(hide_password=True)
        raise StoreUnreachable("the ledger's database", "NEO_LEDGER_URL", address, exc) from exc


def build_provider(settings: Settings) -> EmbeddingProvider:
    """A fresh provider (its async clients belong to the event loop that first uses them).
    Close it: ``await provider.aclose()``, or ``embedding.provider.close_provider``."""
    from neo_assets.embedding.band import band_for  # noqa: PLC0415
    from neo_assets.embedding.factory import build_provider as build  # noqa: PLC0415

    return build(
        settings.embedding.provider,
        base_url=settings.embedding.base_url,
        model=settings.embedding.model,
        api_key=settings.embedding.api_key,
        dimensions=settings.embedding.dimensions,
        request_timeout_ms=settings.embedding.request_timeout_ms,
        context_tokens=band_for(settings).limit_tokens,
    )


@contextmanager
def store_kept_open(settings: Settings) -> Iterator[None]:
    """One embedded Chroma client held open for the block by a caller launching many runs in
    one process (the CLI), so Chroma's system is not restarted per run (docs/performance.md,
    "Sweep"). No-op for a Chroma server or a store that cannot be opened."""
    if settings.store.chroma_url or settings.store.chroma_local == "server":
        yield
        return
    try:
        store = open_store(settings)
    except Exception:  # noqa: BLE001 - only a speed-up: each run opens, and reports, its own
        yield
        return
    with store:
        yield


class OpenOnFirstUse:
    """One handle, opened by the first ``get`` from whichever thread asks first, and
    closed by ``close`` (if it was ever opened); ``get`` after ``close`` raises."""

    def __init__(self, open_: Callable[[], Any], close: Callable[[Any], None]) -> None:
        self._open = open_
        self._close = close
        self._lock = threading.Lock()
        self._value: Any = None
        self.opened = False
        self.closed = False

    def get(self) -> Any:
        with self._lock:
            if self.closed:
                raise RuntimeError("handle used after the run that opened it ended")
            if not self.opened:
                self._value = self._open()
                self.opened = True
            return self._value

    def close(self) -> None:
        with self._lock:
            value, was_open = self._value, self.opened and not self.closed
            self._value, self.closed = None, True
        if was_open:
            self._close(value)
