from neo_assets.query.rules.readiness import RepoHolding, missing_from_store, missing_store_message


def test_only_repos_swept_complete_with_chunks_that_serve_nothing_are_missing() -> None:
    holdings = [
        RepoHolding("gone", "abc123", 4, 0),  # swept, has chunks, serves nothing
        RepoHolding("fine", "abc123", 4, 4),
        RepoHolding("never", None, 0, 0),  # never swept complete: nothing is owed
        RepoHolding("empty", "abc123", 0, 0),  # a repo with nothing to chunk
    ]
    assert [h.repo_slug for h in missing_from_store(holdings)] == ["gone"]
    assert missing_from_store([]) == []


def test_the_message_names_the_repo_the_store_and_the_fix() -> None:
    text = missing_store_message(
        "acme", [RepoHolding("gone", "0123456789abcdef", 4, 0)], "/data/chroma"
    )
    assert "acme/gone" in text and "/data/chroma" in text and "0123456789ab" in text
    assert "neo-assets sweep --force --tenant acme" in text
    many = [RepoHolding(f"r{i}", "x", 1, 0) for i in range(7)]
    assert "and 2 more" in missing_store_message("acme", many, "s")
