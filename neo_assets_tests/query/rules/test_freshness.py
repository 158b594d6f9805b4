from neo_assets.query.rules.freshness import Head, freshness


def test_same_head_is_not_behind() -> None:
    assert freshness("abc", Head("abc", 100.0, 200.0)) == {
        "revision": "abc",
        "behind": False,
        "head": "abc",
        "behindSince": None,
    }


def test_a_moved_head_is_behind_since_its_commit_time_else_first_sight() -> None:
    assert freshness("abc", Head("def", 100.0, 200.0)) == {
        "revision": "abc",
        "behind": True,
        "head": "def",
        "behindSince": 100.0,
    }
    assert freshness("abc", Head("def", None, 200.0))["behindSince"] == 200.0


def test_never_indexed_is_behind_a_known_head() -> None:
    assert freshness(None, Head("def", 5.0, 6.0))["behind"] is True


def test_no_head_known_is_unknown_not_fresh() -> None:
    # A plain directory, or a repo git cannot read now.
    assert freshness("abc", None) == {
        "revision": "abc",
        "behind": None,
        "head": None,
        "behindSince": None,
    }
