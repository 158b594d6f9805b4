"""Build real git repositories in tmp dirs for tests, independent of any global git config.

    repo = GitRepo(tmp_path / "r")            # git init -b main
    repo.write("src/a.py", "x = 1\\n")
    sha = repo.commit("first", when=1_700_000_000)
    repo.symlink("link", "/etc/passwd")
    repo.remove("src/a.py")
    repo.commit("second")

Every git call runs with a scrubbed environment: no system or global config, a fixed
identity, no signing, dates pinned when ``when`` is given.
"""

import os
import subprocess
from pathlib import Path

_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git_env(when: float | None = None) -> dict[str, str]:
    """The environment every helper git call uses (exposed for tests that run git)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(_IDENTITY)
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
        }
    )
    if when is not None:
        stamp = f"@{int(when)} +0000"
        env["GIT_AUTHOR_DATE"] = stamp
        env["GIT_COMMITTER_DATE"] = stamp
    return env


class GitRepo:
    """A real git work tree at ``path`` (created and initialised when ``init``)."""

    def __init__(self, path: str | Path, *, init: bool = True, branch: str = "main") -> None:
        self.path = Path(path)
        if init:
            self.path.mkdir(parents=True, exist_ok=True)
            self.git("init", "-q", "-b", branch)

    def git(self, *args: str, when: float | None = None, input: bytes | None = None) -> str:
        """Run git in the work tree; return stdout (stripped). Raises on failure."""
        done = subprocess.run(
            [
                "git",
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.com",
                "-c",
                "commit.gpgsign=false",
                "-c",
                "core.autocrlf=false",
                *args,
            ],
            cwd=self.path,
            env=git_env(when),
            input=input,
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"git {' '.join(args)} failed ({done.returncode}): "
                f"{done.stderr.decode(errors='replace')}"
            )
        return done.stdout.decode("utf-8", errors="surrogateescape").strip()

    def write(self, rel: str, content: str | bytes) -> Path:
        """Write a file (parents created); str is written as UTF-8 bytes verbatim."""
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8") if isinstance(content, str) else content
        target.write_bytes(data)
        return target

    def symlink(self, rel: str, target: str | Path) -> Path:
        """Create a symlink at ``rel`` pointing at ``target`` (not resolved)."""
        link = self.path / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(str(target), link)
        return link

    def remove(self, rel: str) -> None:
        """Delete a file or symlink from the work tree (the next commit records it)."""
        os.unlink(self.path / rel)

    def commit(self, message: str, when: float | None = None) -> str:
        """Stage everything (``add -A``) and commit; returns the new commit sha.

        ``when`` (epoch seconds) pins both author and committer dates."""
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "--no-verify", "-m", message, when=when)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def branch(self, name: str, rev: str = "HEAD") -> None:
        self.git("branch", "-f", name, rev)

    def tag(self, name: str, rev: str = "HEAD") -> None:
        self.git("tag", "-f", name, rev)

    def switch(self, name: str, *, create: bool = False) -> None:
        self.git("switch", "-q", *(["-c"] if create else []), name)

    def add_gitlink(self, rel: str, commit_sha: str) -> None:
        """Stage a submodule entry (mode 160000) without a real submodule checkout; an
        empty directory stands in for the checkout so ``commit``'s ``add -A`` keeps it."""
        (self.path / rel).mkdir(parents=True, exist_ok=True)
        self.git("update-index", "--add", "--cacheinfo", f"160000,{commit_sha},{rel}")
