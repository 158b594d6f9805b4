"""Running git in one repository: no prompts, no optional locks, English messages, and
nothing in the environment pointing it at another repository. The readers call
``git_commands.run_git`` through the module, so a test's spy on it sees every call."""

import os
import shutil
import subprocess

from neo_assets.core import codes
from neo_assets.sources.model import SourceError

# Variables that would point git at another repository, index or object store.
_GIT_REDIRECT_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
)


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_REDIRECT_VARS}
    # No prompts, no optional index locks (we only read), stable English messages.
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"})
    return env


def git_argv(top: str, *args: str) -> list[str]:
    return ["git", "-C", top, "-c", "log.showSignature=false", *args]


def run_git(top: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``git -C top args`` run to its end, its output captured (never raises on exit)."""
    return subprocess.run(
        git_argv(top, *args),
        env=git_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )


def git_stderr(done: subprocess.CompletedProcess[bytes]) -> str:
    # One line: a summary showing an error's first line must still reach its Fix.
    words = done.stderr.decode("utf-8", errors="replace").split()
    return " ".join(words) or f"exit {done.returncode}"


def ref_is_sane(ref: str) -> bool:
    # A leading '-' would be read as an option; control characters are never in refs.
    return bool(ref) and not ref.startswith("-") and all(c >= " " and c != "\x7f" for c in ref)


def require_git(top: str, ref: str) -> None:
    if shutil.which("git") is None:
        raise SourceError(
            codes.SOURCE_UNREADABLE,
            f"repository {top} (ref {ref!r}) is a git work tree but the git executable "
            "was not found on PATH. Fix: install git (e.g. apt-get install git) or put it "
            "on PATH for the process running the sweep.",
        )
