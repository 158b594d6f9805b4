"""The envelope dispatch (sources/envelope.py): which reader a root gets, and the
settings and roots refused before either reads."""

from pathlib import Path

import pytest

from neo_assets.core import codes
from neo_assets.sources.envelope import build_envelope, read_texts, resolve_revision
from neo_assets.sources.model import SourceError
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.sources.trees import CAP


def test_resolve_revision_matches_the_envelope(rich: dict[str, object], plain: Path) -> None:
    repo = rich["repo"]
    assert isinstance(repo, GitRepo)
    assert resolve_revision(repo.path, max_file_bytes=CAP) == rich["second"]
    assert (
        resolve_revision(repo.path, ref=str(rich["first"]), max_file_bytes=CAP) == (rich["first"])
    )
    with pytest.raises(SourceError):
        resolve_revision(repo.path, ref="no-such-ref", max_file_bytes=CAP)
    expected = build_envelope(plain, exclude=["vendor/**"], max_file_bytes=CAP).revision
    assert resolve_revision(plain, exclude=["vendor/**"], max_file_bytes=CAP) == expected


def test_missing_root(tmp_path: Path) -> None:
    with pytest.raises(SourceError) as caught:
        build_envelope(tmp_path / "nope", exclude=[], max_file_bytes=CAP)
    assert caught.value.code == codes.SOURCE_REPO_MISSING
    assert str(tmp_path / "nope") in str(caught.value)


def test_root_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(SourceError) as caught:
        build_envelope(tmp_path / "f", exclude=[], max_file_bytes=CAP)
    assert caught.value.code == codes.SOURCE_REPO_MISSING


def test_ref_on_plain_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    with pytest.raises(SourceError) as caught:
        build_envelope(tmp_path, ref="main", exclude=[], max_file_bytes=CAP)
    assert caught.value.code == codes.SOURCE_REPO_MISSING
    assert "not the top of a git work tree" in str(caught.value)


def test_subdirectory_of_a_work_tree_is_a_plain_directory(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.write("docs/a.md", "# committed\n")
    repo.commit("c")
    repo.write("docs/a.md", "# dirty\n")
    repo.write("docs/new.md", "# untracked\n")
    env = build_envelope(repo.path / "docs", exclude=[], max_file_bytes=CAP)
    assert env.kind == "dir"
    assert dict(read_texts(env, env.yielded_paths())) == {
        "a.md": "# dirty\n",
        "new.md": "# untracked\n",
    }


def test_invalid_settings_are_refused_before_reading(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_file_bytes"):
        build_envelope(tmp_path, exclude=[], max_file_bytes=0)
    with pytest.raises(ValueError, match="exclude glob"):
        build_envelope(tmp_path, exclude=["!keep"], max_file_bytes=CAP)
