"""The embedding pool's limit row is created before the first sweep step needs it, and a
process that loses the creation race looks again instead of failing its run."""

from pathlib import Path

import dagster as dg

from neo_assets.cli.launch import ensure_pool
from neo_assets.sweep.defs import EMBEDDING_POOL


class RacingStorage:
    """Another process inserts the row between our check and our insert."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.inserts = 0

    def get_concurrency_keys(self) -> set[str]:
        return set(self.keys)

    def initialize_concurrency_limit_to_default(self, key: str) -> bool:
        self.inserts += 1
        self.keys.add(key)  # the winner's row
        raise RuntimeError("duplicate key value violates unique constraint")


class Instance:
    def __init__(self, storage: object) -> None:
        self.event_log_storage = storage


def test_the_race_loser_sees_the_winners_row_and_goes_on() -> None:
    storage = RacingStorage()
    ensure_pool(Instance(storage))  # does not raise
    assert storage.inserts == 1 and EMBEDDING_POOL in storage.keys


def test_a_real_instance_gets_the_pool_with_its_default_limit(tmp_path: Path) -> None:
    (tmp_path / "dagster.yaml").write_text("concurrency:\n  pools:\n    default_limit: 2\n")
    instance = dg.DagsterInstance.local_temp(str(tmp_path))
    try:
        assert EMBEDDING_POOL not in instance.event_log_storage.get_concurrency_keys()
        ensure_pool(instance)
        assert EMBEDDING_POOL in instance.event_log_storage.get_concurrency_keys()
        ensure_pool(instance)  # idempotent
        assert instance.event_log_storage.get_concurrency_info(EMBEDDING_POOL).slot_count == 2
    finally:
        instance.dispose()
