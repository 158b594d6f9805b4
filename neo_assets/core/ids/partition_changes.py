"""Which dynamic partitions to add and remove so they match the declaration (one per tenant
repo, one per tenant); removing a partition keeps its runs and events."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from neo_assets.core.ids.partition_keys import partition_key


@dataclass(frozen=True)
class PartitionChanges:
    add: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.add or self.remove)


def partition_changes(declared: Iterable[str], known: Iterable[str]) -> PartitionChanges:
    wanted = list(dict.fromkeys(declared))
    held = list(dict.fromkeys(known))
    wanted_set, held_set = set(wanted), set(held)
    return PartitionChanges(
        add=tuple(k for k in wanted if k not in held_set),
        remove=tuple(k for k in held if k not in wanted_set),
    )


def repo_partition_keys(declaration: Iterable[tuple[str, Sequence[str]]]) -> list[str]:
    """The declared repos' keys, from ``(tenantId, [repoSlug, ...])`` pairs."""
    return [partition_key(tenant_id, slug) for tenant_id, slugs in declaration for slug in slugs]


def tenant_partition_keys(declaration: Iterable[tuple[str, Sequence[str]]]) -> list[str]:
    """The declared tenants' keys: every tenant, whether or not it declares a repo."""
    return [tenant_id for tenant_id, _slugs in declaration]
