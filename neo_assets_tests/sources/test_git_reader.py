"""The git reader (sources/git_reader.py): a commit's tree, never the work tree, and its
blobs through cat-file."""

import os
import signal
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from neo_assets.core import codes
from neo_assets.sources import git_commands
from neo_assets.sources.envelope import build_envelope, read_texts, resolve_revision
from neo_assets.sources.git_blobs import CatFile
from neo_assets.sources.model import Envelope, SourceError
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.sources.trees import CAP, SECRET, T1, T2, reasons


def test_git_envelope_is_the_commit_not_the_work_tree(rich: dict[str, object]) -> None:
    env = rich["envelope"]
    assert isinstance(env, Envelope)
    assert env.kind == "git"
    assert env.revision == rich["second"]
    assert env.root == os.path.realpath(rich["repo"].path)  # type: ignore[attr-defined]
    paths = set(env.all_paths())
    assert "untracked.py" not in paths  # untracked work-tree files are not in the commit
    assert "README.md" in paths  # deleted in the work tree, still in the commit
    texts = dict(read_texts(env, env.yielded_paths()))
    assert texts["src/app.py"] == "VALUE = 2\n"  # committed, not the dirty edit
    assert texts["README.md"] == "# Title\n"


def test_git_envelope_marks_every_path(rich: dict[str, object]) -> None:
    env = rich["envelope"]
    assert isinstance(env, Envelope)
    assert reasons(env) == {
        "README.md": None,
        "assets/logo.bin": codes.SKIP_BINARY,
        "big.txt": codes.SKIP_TOO_LARGE,
        "bin/run.sh": None,
        "dos sier/naïve é.md": None,
        "exact.txt": None,
        "inner-link": codes.SKIP_SYMLINK,
        "latin1.txt": None,
        "leak": codes.SKIP_SYMLINK,
        "src/app.py": None,
        "third_party/sub": codes.SKIP_SUBMODULE,
        "vendor/deep/more.js": codes.SKIP_EXCLUDED,
        "vendor/lib.js": codes.SKIP_EXCLUDED,
    }
    assert list(env.all_paths()) == sorted(env.all_paths())
    assert env.yielded_paths() == tuple(p for p, r in reasons(env).items() if r is None)
    assert env.skip_counts() == {
        codes.SKIP_BINARY: 1,
        codes.SKIP_EXCLUDED: 2,
        codes.SKIP_SUBMODULE: 1,
        codes.SKIP_SYMLINK: 2,
        codes.SKIP_TOO_LARGE: 1,
    }
    big = env.entry("big.txt")
    assert big is not None and big.size == CAP + 1 and not big.yielded


def test_git_symlink_target_is_never_read(rich: dict[str, object]) -> None:
    env = rich["envelope"]
    assert isinstance(env, Envelope)
    leak = env.entry("leak")
    assert leak is not None and leak.skip_reason == codes.SKIP_SYMLINK
    with pytest.raises(ValueError, match="not a yielded path"):
        list(read_texts(env, ["leak"]))
    texts = dict(read_texts(env, env.yielded_paths()))
    assert not any(SECRET.decode() in t for t in texts.values())


def test_git_texts_decode_invalid_utf8_and_unicode_paths(rich: dict[str, object]) -> None:
    env = rich["envelope"]
    assert isinstance(env, Envelope)
    texts = dict(read_texts(env, ["latin1.txt", "dos sier/naïve é.md", "exact.txt"]))
    assert texts["latin1.txt"] == "caf\ufffd cr\ufffdme \ufffd\n"
    assert texts["dos sier/naïve é.md"] == "# Ünïcode\n"
    assert texts["exact.txt"] == "y" * CAP  # exactly at the cap is yielded


def test_read_texts_streams_in_request_order(rich: dict[str, object]) -> None:
    env = rich["envelope"]
    assert isinstance(env, Envelope)
    order = ["src/app.py", "README.md", "bin/run.sh", "README.md"]
    assert [p for p, _ in read_texts(env, order)] == order
    stream = read_texts(env, env.yielded_paths())
    assert next(stream)[0] == env.yielded_paths()[0]
    stream.close()  # abandoning the stream early releases the git process


def test_git_changed_at_is_the_last_commit_touching_the_path(rich: dict[str, object]) -> None:
    env = rich["envelope"]
    assert isinstance(env, Envelope)
    times = {e.path: e.changed_at for e in env.entries}
    assert times["src/app.py"] == T2
    assert times["third_party/sub"] == T2
    assert times["README.md"] == T1
    assert times["leak"] == T1
    assert times["vendor/lib.js"] == T1


def test_git_blob_is_the_object_id(rich: dict[str, object]) -> None:
    env = rich["envelope"]
    repo = rich["repo"]
    assert isinstance(env, Envelope) and isinstance(repo, GitRepo)
    entry = env.entry("src/app.py")
    assert entry is not None
    assert entry.blob == repo.git("rev-parse", f"{rich['second']}:src/app.py")


def test_git_ref_other_than_head(rich: dict[str, object]) -> None:
    repo = rich["repo"]
    assert isinstance(repo, GitRepo)
    first = str(rich["first"])
    repo.branch("old", first)
    repo.tag("v1", first)
    by_branch = build_envelope(repo.path, ref="old", exclude=[], max_file_bytes=CAP)
    by_tag = build_envelope(repo.path, ref="v1", exclude=[], max_file_bytes=CAP)
    by_sha = build_envelope(repo.path, ref=first, exclude=[], max_file_bytes=CAP)
    assert by_branch.revision == by_tag.revision == by_sha.revision == first
    assert by_branch == by_tag == by_sha
    assert "third_party/sub" not in by_branch.all_paths()  # added by the second commit
    assert dict(read_texts(by_branch, ["src/app.py"])) == {"src/app.py": "VALUE = 1\n"}
    assert reasons(by_branch)["vendor/lib.js"] is None  # no exclude globs this time


def test_git_envelope_is_deterministic(rich: dict[str, object]) -> None:
    repo = rich["repo"]
    assert isinstance(repo, GitRepo)
    again = build_envelope(repo.path, exclude=["vendor/**"], max_file_bytes=CAP)
    assert again == rich["envelope"]


def test_the_top_and_the_commit_are_one_git_process_and_errors_stay_precise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import neo_assets.sources.git_commands as git_commands

    repo = GitRepo(tmp_path / "r")
    repo.write("a.txt", "a\n")
    sha = repo.commit("c")
    calls = _spy(monkeypatch, git_commands, "run_git", lambda _top, *args: args[:2])
    assert resolve_revision(repo.path, max_file_bytes=CAP) == sha
    assert resolve_revision(repo.path, ref="main", max_file_bytes=CAP) == sha
    assert calls == [("rev-parse", "--show-toplevel")] * 2  # one process each
    assert build_envelope(repo.path, max_file_bytes=CAP).revision == sha
    assert [c for c in calls[2:] if c[0] == "rev-parse"] == [("rev-parse", "--show-toplevel")]

    # A ref naming no commit: the repo is still checked first, then the ref's own error.
    calls.clear()
    with pytest.raises(SourceError) as err:
        resolve_revision(repo.path, ref="no-such-ref", max_file_bytes=CAP)
    assert err.value.code == codes.SOURCE_REPO_MISSING and "'no-such-ref'" in str(err.value)
    assert calls == [("rev-parse", "--show-toplevel")] * 2 + [("rev-parse", "--verify")]
    # A ref git would read as an option never reaches git as one.
    calls.clear()
    with pytest.raises(SourceError) as err:
        resolve_revision(repo.path, ref="--all", max_file_bytes=CAP)
    assert err.value.code == codes.SOURCE_REPO_MISSING and "not a valid ref" in str(err.value)
    assert calls == [("rev-parse", "--show-toplevel")]


def test_git_non_utf8_path_is_listed_unreadable(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.write("ok.txt", "ok\n")
    with open(os.path.join(os.fsencode(repo.path), b"bad-\xff.txt"), "wb") as handle:
        handle.write(b"content\n")
    repo.commit("c")
    env = build_envelope(repo.path, exclude=[], max_file_bytes=CAP)
    bad = env.entry("bad-\ufffd.txt")
    assert bad is not None
    assert bad.skip_reason == codes.SKIP_UNREADABLE
    assert bad.skip_detail == "path is not valid UTF-8"
    assert env.yielded_paths() == ("ok.txt",)


def test_bad_ref_names_repo_ref_and_fix(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.write("a.txt", "a\n")
    repo.commit("c")
    with pytest.raises(SourceError) as caught:
        build_envelope(repo.path, ref="no-such-branch", exclude=[], max_file_bytes=CAP)
    assert caught.value.code == codes.SOURCE_REPO_MISSING
    message = str(caught.value)
    assert str(repo.path) in message and "no-such-branch" in message and "Fix:" in message


def test_ref_that_looks_like_an_option_is_refused(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.write("a.txt", "a\n")
    repo.commit("c")
    target = tmp_path / "written"
    with pytest.raises(SourceError) as caught:
        build_envelope(repo.path, ref=f"--output={target}", exclude=[], max_file_bytes=CAP)
    assert caught.value.code == codes.SOURCE_REPO_MISSING
    assert not target.exists()


def test_empty_repository_has_no_head(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "empty")
    with pytest.raises(SourceError) as caught:
        build_envelope(repo.path, exclude=[], max_file_bytes=CAP)
    assert caught.value.code == codes.SOURCE_REPO_MISSING
    assert "HEAD" in str(caught.value)


def test_git_missing_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.write("a.txt", "a\n")
    repo.commit("c")
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    monkeypatch.setenv("PATH", str(empty_bin))
    with pytest.raises(SourceError) as caught:
        build_envelope(repo.path, exclude=[], max_file_bytes=CAP)
    assert caught.value.code == codes.SOURCE_UNREADABLE
    assert "git" in str(caught.value) and str(repo.path) in str(caught.value)


def test_broken_dot_git_is_a_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    (root / ".git").write_text("gitdir: /nowhere/at/all\n")
    (root / "a.txt").write_text("a\n")
    with pytest.raises(SourceError) as caught:
        build_envelope(root, exclude=[], max_file_bytes=CAP)
    assert caught.value.code == codes.SOURCE_UNREADABLE
    assert str(root) in str(caught.value)


def test_git_environment_cannot_redirect_the_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = GitRepo(tmp_path / "mine")
    mine.write("mine.txt", "mine\n")
    mine.commit("c")
    other = GitRepo(tmp_path / "other")
    other.write("other.txt", "other\n")
    other.commit("c")
    monkeypatch.setenv("GIT_DIR", str(other.path / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other.path))
    env = build_envelope(mine.path, exclude=[], max_file_bytes=CAP)
    assert env.all_paths() == ("mine.txt",)


def _blob_ids(repo: GitRepo, n: int, size: int) -> tuple[list[str], dict[str, bytes]]:
    bodies = {f"f{i:04d}.txt": (f"{i:04d}" * (size // 4)).encode() for i in range(n)}
    for rel, body in bodies.items():
        repo.write(rel, body)
    repo.commit("blobs", when=T1)
    oids = repo.git("rev-parse", *[f"HEAD:{rel}" for rel in bodies]).split()
    return oids, dict(zip(oids, bodies.values(), strict=True))


def test_read_many_answers_every_request_in_order_past_the_pipe_buffers(tmp_path: Path) -> None:
    # 400 blobs of 4 KB: 1.6 MB of answers and 16 KB of requests, far past a 64 KB pipe,
    # so the requests must be written while the answers are read, or both sides block.
    repo = GitRepo(tmp_path / "repo")
    oids, bodies = _blob_ids(repo, 400, 4096)
    tree = repo.git("rev-parse", "HEAD^{tree}").strip()
    asked = [*oids, "0" * 40, tree, oids[0]]  # a missing object, a tree, a repeat
    with CatFile(str(repo.path)) as cat:
        got = list(cat.read_many(asked))
    assert [oid for oid, _ in got] == asked
    assert [data for _, data in got[:400]] == [bodies[o] for o in oids]
    assert got[400][1] is None and got[401][1] is None  # not a blob: None, not an error
    assert got[402][1] == bodies[oids[0]]


@pytest.mark.timeout(30)
def test_read_many_stopped_early_ends_git_without_waiting(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    oids, bodies = _blob_ids(repo, 300, 8192)
    cat = CatFile(str(repo.path))
    answers = cat.read_many(oids)
    first_oid, first = next(answers)
    assert (first_oid, first) == (oids[0], bodies[oids[0]])
    answers.close()  # git is blocked on answers nobody reads: it is ended, not waited on
    # Left alone, git would stay blocked on its output for ever.
    assert cat._proc.wait(timeout=20) == -signal.SIGKILL
    cat.close()
    # A fresh reader still works after that.
    with CatFile(str(repo.path)) as again:
        assert list(again.read_many([oids[-1]])) == [(oids[-1], bodies[oids[-1]])]


def test_read_texts_names_a_blob_gone_from_the_object_store(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.write("a.py", "A = 1\n")
    repo.write("b.py", "B = 2\n")
    repo.commit("two", when=T1)
    env = build_envelope(repo.path, ref="HEAD", exclude=(), max_file_bytes=CAP)
    blob_b = env.entry("b.py").blob
    obj = repo.path / ".git" / "objects" / blob_b[:2] / blob_b[2:]
    obj.chmod(0o644)
    obj.unlink()
    # What the envelope read while classifying is still the commit's content...
    assert dict(read_texts(env, ["b.py"])) == {"b.py": "B = 2\n"}
    # ...but a blob asked of git again must still be there.
    env.read_ahead.clear()
    texts = read_texts(env, ["a.py", "b.py"])
    assert next(texts) == ("a.py", "A = 1\n")
    with pytest.raises(SourceError) as err:
        next(texts)
    assert err.value.code == codes.SOURCE_UNREADABLE and blob_b in str(err.value)


def _spy(monkeypatch: pytest.MonkeyPatch, owner: object, name: str, note) -> list:  # noqa: ANN001
    """Replace ``owner.name`` with a wrapper that appends ``note(*args)`` to the returned
    list before calling the real one."""
    seen: list = []
    real = getattr(owner, name)

    def recording(*args):  # noqa: ANN002, ANN202
        seen.append(note(*args))
        return real(*args)

    monkeypatch.setattr(owner, name, recording)
    return seen


def _asking(monkeypatch: pytest.MonkeyPatch) -> list[set[str]]:
    import neo_assets.sources.git_reader as git_reader

    return _spy(monkeypatch, git_reader, "blob_sizes", lambda _top, oids: set(oids))


def test_sizes_come_from_the_previous_envelope_and_git_is_asked_only_for_new_blobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.write("a.py", "A = 1\n")
    repo.write("big.txt", "x" * (CAP + 1))
    repo.write("empty.txt", "")
    repo.write("vendor/v.js", "var v;\n")
    repo.symlink("link", "a.py")
    repo.commit("first", when=T1)
    asked = _asking(monkeypatch)
    first = build_envelope(repo.path, ref="HEAD", exclude=["vendor/**"], max_file_bytes=CAP)
    assert first.entry("big.txt").skip_reason == codes.SKIP_TOO_LARGE
    assert first.entry("big.txt").size == CAP + 1 and first.entry("link").size == len("a.py")

    repo.write("a.py", "A = 2  # longer\n")
    repo.write("c.py", "C = 3\n")
    repo.commit("second", when=T2)
    asked.clear()
    again = build_envelope(
        repo.path, ref="HEAD", exclude=["vendor/**"], max_file_bytes=CAP, previous=first
    )
    assert asked == [{again.entry("a.py").blob, again.entry("c.py").blob}]
    fresh = build_envelope(repo.path, ref="HEAD", exclude=["vendor/**"], max_file_bytes=CAP)
    assert again == fresh  # sizes, verdicts and times as if nothing were known

    asked.clear()
    relisted = build_envelope(
        repo.path, ref="HEAD", exclude=["vendor/*"], max_file_bytes=CAP, previous=again
    )
    assert asked == [set()]  # new rules: listed again, every size already known
    assert relisted.entry("vendor/v.js").skip_reason == codes.SKIP_EXCLUDED


def _listings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    import neo_assets.sources.git_commands as git_commands

    return _spy(monkeypatch, git_commands, "run_git", lambda _top, *args: args[0])


def test_the_same_commit_under_the_same_rules_is_the_recorded_envelope_unlisted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forced sweep of an unchanged repo: the recorded envelope is the envelope; git
    only resolves the ref. A change of rule lists the tree again; a new commit under the
    same rules is the recorded envelope carried by the tree's changes."""
    repo = GitRepo(tmp_path / "repo")
    repo.write("a.py", "A = 1\n")
    repo.write("big.txt", "x" * (CAP + 1))
    repo.write("vendor/v.js", "var v;\n")
    repo.commit("first", when=T1)
    first = build_envelope(repo.path, ref="HEAD", exclude=["vendor/**"], max_file_bytes=CAP)
    # As the sweep has it: rebuilt from the ledger, rooted where tenants.yaml says.
    recorded = replace(first, root=str(repo.path) + "/", read_ahead={"x": b"y"})
    git_calls = _listings(monkeypatch)
    same = build_envelope(
        repo.path, ref="HEAD", exclude=["vendor/**"], max_file_bytes=CAP, previous=recorded
    )
    assert "ls-tree" not in git_calls and "log" not in git_calls
    assert same.entries is recorded.entries and same == first
    assert same.root == first.root and same.read_ahead == {}

    for changed in (
        {"exclude": ["vendor/v.js"], "max_file_bytes": CAP},
        {"exclude": ["vendor/**"], "max_file_bytes": CAP + 10},
    ):
        git_calls.clear()
        again = build_envelope(repo.path, ref="HEAD", previous=recorded, **changed)
        assert "ls-tree" in git_calls
        assert again == build_envelope(repo.path, ref="HEAD", **changed)
    assert again.entry("big.txt").yielded  # the new cap was heard

    repo.write("b.py", "B = 2\n")
    repo.commit("second", when=T2)
    git_calls.clear()
    moved = build_envelope(
        repo.path, ref="HEAD", exclude=["vendor/**"], max_file_bytes=CAP, previous=recorded
    )
    assert "ls-tree" not in git_calls and "diff-tree" in git_calls
    assert moved.entry("b.py").yielded
    assert moved == build_envelope(repo.path, ref="HEAD", exclude=["vendor/**"], max_file_bytes=CAP)


def _as_recorded(envelope: Envelope) -> Envelope:
    """As a sweep has it: rebuilt from the ledger, without what the ledger does not keep."""
    entries = tuple(e._replace(skip_detail=None) for e in envelope.entries)
    return replace(envelope, entries=entries, read_ahead={})


def _same_listing(a: Envelope, b: Envelope) -> None:
    assert a.revision == b.revision and a.rules == b.rules
    assert [e._replace(skip_detail=None) for e in a.entries] == [
        e._replace(skip_detail=None) for e in b.entries
    ]


def test_a_new_commit_is_the_recorded_envelope_carried_by_the_trees_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every kind of change between two commits: the envelope carried by git diff-tree
    (only changed paths listed, classified and read) equals the tree listed afresh."""
    repo = GitRepo(tmp_path / "repo")
    repo.write("keep.py", "K = 1\n")
    repo.write("edit.py", "E = 1\n")
    repo.write("gone.py", "G = 1\n")
    repo.write("move_me.py", "M = 1\n")
    repo.write("becomes_dir", "file for now\n")
    repo.write("vendor/v.js", "var v;\n")
    repo.write("tool.sh", "#!/bin/sh\n")
    repo.symlink("link", "keep.py")
    repo.commit("first", when=T1)
    rules = {"exclude": ["vendor/**"], "max_file_bytes": CAP}
    recorded = _as_recorded(build_envelope(repo.path, **rules))

    repo.write("edit.py", "E = 2\n")
    repo.remove("gone.py")
    repo.remove("move_me.py")
    repo.write("moved/here.py", "M = 1\n")  # a rename: the same blob at a new path
    repo.remove("becomes_dir")
    repo.write("becomes_dir/inner.py", "I = 1\n")
    repo.write("vendor/new.js", "var n;\n")  # excluded by the same rules
    repo.write("blob.bin", b"\x00\x01binary")
    repo.write("huge.txt", "x" * (CAP + 1))
    os.chmod(repo.path / "tool.sh", 0o755)
    repo.remove("link")
    repo.symlink("link", "edit.py")
    repo.commit("second", when=T2)

    calls = _listings(monkeypatch)
    reads = _spy(monkeypatch, CatFile, "_answer", lambda _self, oid: oid)
    carried = build_envelope(repo.path, previous=recorded, **rules)
    assert "diff-tree" in calls and "ls-tree" not in calls
    carried_reads = list(reads)
    fresh = build_envelope(repo.path, **rules)
    _same_listing(carried, fresh)
    assert carried.entry("keep.py") == recorded.entry("keep.py")  # carried as recorded
    assert carried.entry("moved/here.py").changed_at == T2  # dated by the new commit
    assert carried.entry("blob.bin").skip_reason == codes.SKIP_BINARY
    assert carried.entry("huge.txt").skip_reason == codes.SKIP_TOO_LARGE
    assert carried.entry("gone.py") is None and carried.entry("becomes_dir") is None
    assert carried.entry("tool.sh").changed_at == T2  # only its mode changed
    # Read: only contents never seen (moved/here.py's and tool.sh's blobs were known).
    new_text = {"edit.py", "becomes_dir/inner.py", "blob.bin"}
    assert sorted(carried_reads) == sorted(e.blob for e in fresh.entries if e.path in new_text)


def test_the_tree_is_listed_whole_when_the_recorded_commit_cannot_be_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.write("a.py", "A = 1\n")
    repo.commit("first", when=T1)
    recorded = _as_recorded(build_envelope(repo.path, max_file_bytes=CAP))
    repo.write("b.py", "B = 1\n")
    repo.commit("second", when=T2)
    fresh = build_envelope(repo.path, max_file_bytes=CAP)
    calls = _listings(monkeypatch)
    for previous in (
        replace(
            recorded, revision="f" * 40
        ),  # a commit this repo does not have (a force-push and gc)
        replace(recorded, revision="--no-index"),  # never handed to git as an option
        replace(recorded, rules=""),  # recorded before the rules were
        replace(
            recorded,
            entries=(recorded.entries[0]._replace(skip_reason=codes.SKIP_UNREADABLE),),
        ),  # an unreadable path may be readable now
    ):
        calls.clear()
        _same_listing(build_envelope(repo.path, previous=previous, max_file_bytes=CAP), fresh)
        assert "ls-tree" in calls


def test_a_blob_missing_then_restored_gets_its_real_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.write("a.py", "A = 1\n")
    repo.write("b.py", "B = 22\n")
    repo.commit("two", when=T1)
    blob_b = repo.git("rev-parse", "HEAD:b.py").strip()
    obj = repo.path / ".git" / "objects" / blob_b[:2] / blob_b[2:]
    saved = obj.read_bytes()
    obj.chmod(0o644)
    obj.unlink()
    broken = build_envelope(repo.path, ref="HEAD", exclude=(), max_file_bytes=CAP)
    entry = broken.entry("b.py")
    assert (entry.size, entry.skip_reason) == (0, codes.SKIP_UNREADABLE)

    obj.write_bytes(saved)  # fetched again
    asked = _asking(monkeypatch)
    mended = build_envelope(repo.path, ref="HEAD", exclude=(), max_file_bytes=CAP, previous=broken)
    assert asked == [{blob_b}]  # the recorded 0 was not a size
    assert (mended.entry("b.py").size, mended.entry("b.py").yielded) == (len("B = 22\n"), True)


def _shared_blob_repo(root: Path) -> GitRepo:
    repo = GitRepo(root)
    repo.write("a.py", "A = 1\n")
    repo.write("b.py", "B = 22\n")
    repo.write("same_as_a.py", "A = 1\n")  # the same blob as a.py
    repo.write("c.md", "# C\n" * 10)
    repo.write("logo.bin", b"\x89PNG\r\n\x1a\n\x00\x00binary")
    repo.commit("one", when=T1)
    return repo


def _counting_git_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    return _spy(monkeypatch, CatFile, "read_many", lambda _self, oids: len(oids))


def test_the_blobs_read_to_classify_them_are_handed_to_the_first_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _shared_blob_repo(tmp_path / "r")
    env = build_envelope(repo.path, max_file_bytes=CAP)
    by_path = {e.path: e for e in env.entries}
    # Text blobs only (the binary one was read, and is not kept), each blob once.
    assert set(env.read_ahead) == {by_path[p].blob for p in ("a.py", "b.py", "c.md")}
    asked = _counting_git_reads(monkeypatch)
    paths = ["c.md", "a.py", "same_as_a.py", "b.py", "a.py"]
    first = list(read_texts(env, paths))
    assert asked == []  # nothing asked of git again
    assert first == [
        ("c.md", "# C\n" * 10),
        ("a.py", "A = 1\n"),
        ("same_as_a.py", "A = 1\n"),
        ("b.py", "B = 22\n"),
        ("a.py", "A = 1\n"),
    ]
    assert env.read_ahead == {}  # handed over once: the sweep holds them no longer
    assert list(read_texts(env, paths)) == first  # later reads ask git, same texts
    assert asked == [len(paths)]


def test_a_read_ahead_over_budget_keeps_some_and_reads_the_rest_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import neo_assets.sources.git_reader as git_reader

    repo = _shared_blob_repo(tmp_path / "r")
    monkeypatch.setattr(git_reader, "READ_AHEAD_BYTES", 10)  # a.py's 6 bytes fit
    env = build_envelope(repo.path, max_file_bytes=CAP)
    assert sum(len(b) for b in env.read_ahead.values()) <= 10 and env.read_ahead
    asked = _counting_git_reads(monkeypatch)
    paths = ["b.py", "a.py", "c.md", "same_as_a.py"]
    assert list(read_texts(env, paths)) == [
        ("b.py", "B = 22\n"),
        ("a.py", "A = 1\n"),
        ("c.md", "# C\n" * 10),
        ("same_as_a.py", "A = 1\n"),
    ]
    assert asked == [2]  # only what the envelope did not keep


def _many_files(tmp_path: Path, n: int) -> GitRepo:
    repo = GitRepo(tmp_path / "many")
    for i in range(n):
        repo.write(f"m/f{i:04d}.py", f"X_{i} = {i}\n")
    repo.write("m/f9999.bin", b"\x00\x01binary")
    repo.commit("many", when=T1)
    return repo


def test_many_blobs_are_read_by_two_readers_with_the_same_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import neo_assets.sources.git_blobs as git_blobs

    repo = _many_files(tmp_path, git_blobs.PARALLEL_READ_MIN + 44)
    # One object missing, late in the listing: the second reader's part.
    late = repo.git("rev-parse", "HEAD:m/f0290.py").strip()
    (repo.path / ".git" / "objects" / late[:2] / late[2:]).unlink()
    readers: list[str] = []
    opened = git_blobs.CatFile.__init__

    def counting(self, top: str) -> None:  # noqa: ANN001
        readers.append(top)
        opened(self, top)

    monkeypatch.setattr(git_blobs.CatFile, "__init__", counting)
    both = build_envelope(repo.path, ref="HEAD", exclude=(), max_file_bytes=CAP)
    assert len(readers) == git_blobs.BLOB_READERS == 2
    monkeypatch.setattr(git_blobs, "BLOB_READERS", 1)
    readers.clear()
    one = build_envelope(repo.path, ref="HEAD", exclude=(), max_file_bytes=CAP)
    assert len(readers) == 1
    assert both.entries == one.entries
    assert set(both.read_ahead) == set(one.read_ahead)
    assert both.entry("m/f0290.py").skip_reason == codes.SKIP_UNREADABLE
    assert both.entry("m/f9999.bin").skip_reason == codes.SKIP_BINARY
    assert both.entry("m/f0003.py").yielded


def test_a_blob_reader_that_fails_fails_the_envelope(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import neo_assets.sources.git_blobs as git_blobs

    repo = _many_files(tmp_path, git_blobs.PARALLEL_READ_MIN + 44)
    late = repo.git("rev-parse", "HEAD:m/f0290.py").strip()
    answer = git_blobs.CatFile._answer

    def dying(self, oid: str) -> bytes | None:  # noqa: ANN001
        if oid == late:
            raise SourceError(codes.SOURCE_UNREADABLE, f"git cat-file stopped answering at {oid}")
        return answer(self, oid)

    monkeypatch.setattr(git_blobs.CatFile, "_answer", dying)
    with pytest.raises(SourceError, match="stopped answering"):
        build_envelope(repo.path, ref="HEAD", exclude=(), max_file_bytes=CAP)


def test_gits_message_over_several_lines_reads_as_one() -> None:
    # Outside the root file system git adds a second line ("Stopping at filesystem
    # boundary ..."); a summary that shows an error's first line must still reach the Fix.
    done = subprocess.CompletedProcess(
        ["git"],
        128,
        b"",
        b"fatal: not a git repository (or any parent up to mount point /dev)\n"
        b"Stopping at filesystem boundary (GIT_DISCOVERY_ACROSS_FILESYSTEM not set).\n",
    )
    assert git_commands.git_stderr(done) == (
        "fatal: not a git repository (or any parent up to mount point /dev) "
        "Stopping at filesystem boundary (GIT_DISCOVERY_ACROSS_FILESYSTEM not set)."
    )
    assert git_commands.git_stderr(subprocess.CompletedProcess(["git"], 3, b"", b" \n")) == "exit 3"
