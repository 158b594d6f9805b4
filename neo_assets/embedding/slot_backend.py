"""Which slots a provider's requests take: file locks on this machine, or advisory locks in
a Postgres ledger shared by every machine (``NEO_PROVIDER_SLOTS``). Its own module because
it chooses between the embedding's file slots and the store's ledger slots, which are built
on them."""

from pathlib import Path

from neo_assets.config.settings import load_settings
from neo_assets.embedding.provider_slots import (
    ProviderSlots,
    Slots,
    default_slots_root,
    ledger_is_postgres,
    provider_key,
)
from neo_assets.store.ledger_slots import LedgerSlots, slots_engine


def slots_for(name: str, endpoint: str, model: str, slots: int, root: Path | None = None) -> Slots:
    """The provider's slots: file locks under ``root`` (this machine), or advisory locks
    in the Postgres ledger when ``NEO_PROVIDER_SLOTS`` says so (``auto``: whenever the
    ledger is Postgres), so sweeps on every machine sharing it see each other."""
    settings = load_settings()
    key = provider_key(name, endpoint, model)
    url = settings.store.resolved_ledger_url
    mode = settings.embedding.slots
    if root is None and (mode == "ledger" or (mode == "auto" and ledger_is_postgres(url))):
        if not ledger_is_postgres(url):
            raise ValueError(
                "NEO_PROVIDER_SLOTS=ledger needs a Postgres NEO_LEDGER_URL (advisory locks); "
                f"the ledger is {url.split(':', 1)[0]}: set NEO_PROVIDER_SLOTS=local"
            )
        return LedgerSlots(slots_engine(url), key, slots)
    base = root or settings.embedding.slots_dir or default_slots_root()
    return ProviderSlots(Path(base) / key, slots)
