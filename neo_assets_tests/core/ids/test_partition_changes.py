"""The rule that brings dynamic partitions to the declaration: which keys to add, which
to remove."""

from neo_assets.core.ids.partition_changes import (
    PartitionChanges,
    partition_changes,
    repo_partition_keys,
    tenant_partition_keys,
)

DECLARATION = [("acme", ["widgets", "gadgets"]), ("globex", ["tools"]), ("initech", [])]


def test_nothing_known_adds_every_declared_key_in_declaration_order() -> None:
    changes = partition_changes(["b/x", "a/y", "c/z"], [])
    assert changes == PartitionChanges(add=("b/x", "a/y", "c/z"), remove=())


def test_a_key_no_longer_declared_is_removed_and_a_new_one_added() -> None:
    changes = partition_changes(["acme/widgets", "acme/gizmos"], ["acme/widgets", "acme/gadgets"])
    assert changes.add == ("acme/gizmos",)
    assert changes.remove == ("acme/gadgets",)


def test_removed_keys_keep_the_instance_order() -> None:
    changes = partition_changes([], ["z/1", "a/2", "m/3"])
    assert changes.remove == ("z/1", "a/2", "m/3") and changes.add == ()


def test_matching_sets_change_nothing_whatever_the_order() -> None:
    changes = partition_changes(["a/1", "b/2"], ["b/2", "a/1"])
    assert changes == PartitionChanges() and not changes


def test_duplicates_are_asked_once() -> None:
    changes = partition_changes(["a/1", "a/1", "b/2"], ["c/3", "c/3"])
    assert changes.add == ("a/1", "b/2") and changes.remove == ("c/3",)


def test_a_key_is_never_both_added_and_removed() -> None:
    changes = partition_changes(["a/1", "b/2", "c/3"], ["b/2", "d/4", "a/1"])
    assert not set(changes.add) & set(changes.remove)
    assert changes.add == ("c/3",) and changes.remove == ("d/4",)


def test_repo_keys_are_tenant_slash_slug_in_declaration_order() -> None:
    assert repo_partition_keys(DECLARATION) == ["acme/widgets", "acme/gadgets", "globex/tools"]


def test_every_declared_tenant_has_a_key_even_without_repos() -> None:
    assert tenant_partition_keys(DECLARATION) == ["acme", "globex", "initech"]
