"""Fixtures of the envelope tests: the secret outside every root, a rich git repository
(two commits, a dirty work tree, every kind of entry) and a plain directory."""

import os
from pathlib import Path

import pytest

from neo_assets.sources.envelope import build_envelope
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.sources.trees import CAP, SECRET, T1, T2


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("outside")
    (d / "secret.txt").write_bytes(SECRET)
    return d


@pytest.fixture(scope="module")
def rich(tmp_path_factory: pytest.TempPathFactory, outside: Path) -> dict[str, object]:
    """A repository with two commits, a dirty work tree and every kind of entry."""
    repo = GitRepo(tmp_path_factory.mktemp("rich") / "repo")
    repo.write("src/app.py", "VALUE = 1\n")
    repo.write("README.md", "# Title\n")
    repo.write("vendor/lib.js", "var x = 1;\n")
    repo.write("vendor/deep/more.js", "var y = 2;\n")
    repo.write("assets/logo.bin", b"\x89PNG\r\n\x1a\n\x00\x00\x00binary")
    repo.write("big.txt", "x" * (CAP + 1))
    repo.write("exact.txt", "y" * CAP)
    repo.write("latin1.txt", b"caf\xe9 cr\xe8me \xff\n")
    repo.write("dos sier/naïve é.md", "# Ünïcode\n")
    repo.write("bin/run.sh", "#!/bin/sh\necho hi\n")
    os.chmod(repo.path / "bin/run.sh", 0o755)
    repo.symlink("leak", outside / "secret.txt")
    repo.symlink("inner-link", "src/app.py")
    first = repo.commit("first", when=T1)
    repo.write("src/app.py", "VALUE = 2\n")
    repo.add_gitlink("third_party/sub", first)
    second = repo.commit("second", when=T2)
    # dirty work tree: a modified tracked file, an untracked file, a deleted file
    repo.write("src/app.py", "VALUE = 'dirty'\n")
    repo.write("untracked.py", "print('never seen')\n")
    repo.remove("README.md")
    envelope = build_envelope(repo.path, exclude=["vendor/**"], max_file_bytes=CAP)
    return {"repo": repo, "first": first, "second": second, "envelope": envelope}


@pytest.fixture
def plain(tmp_path: Path, outside: Path) -> Path:
    root = tmp_path / "plain"
    (root / "src").mkdir(parents=True)
    (root / "src/app.py").write_text("VALUE = 1\n")
    (root / "vendor").mkdir()
    (root / "vendor/lib.js").write_text("var x;\n")
    (root / "blob.bin").write_bytes(b"\x00\x01\x02")
    (root / "big.txt").write_text("x" * (CAP + 1))
    (root / "latin1.txt").write_bytes(b"caf\xe9\n")
    (root / "dos sier").mkdir()
    (root / "dos sier/é.md").write_text("# é\n")
    os.symlink(outside / "secret.txt", root / "leak")
    os.symlink("src/app.py", root / "inner-link")
    os.symlink(".", root / "src/loop")  # a directory loop
    os.symlink("..", root / "src/up")
    os.symlink(outside, root / "outside-dir")
    os.mkfifo(root / "pipe")
    (root / "nested/.git").mkdir(parents=True)
    (root / "nested/.git/config").write_text("[core]\n")
    (root / "nested/kept.txt").write_text("kept\n")
    return root
