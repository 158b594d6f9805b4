"""A commit's tree as git lists it: every entry (``ls-tree``), the entries changed since
another commit (``diff-tree``), and when each path last changed (one streamed ``log``)."""

import subprocess

from neo_assets.core import codes
from neo_assets.sources import git_commands
from neo_assets.sources.git_commands import git_argv, git_env, git_stderr, ref_is_sane
from neo_assets.sources.model import SourceError
from neo_assets.sources.rules.path_rules import is_safe_relative_path

# One entry of a tree as git lists it: (mode, object type, object id, raw path).
Listed = tuple[str, str, str, bytes]


def decode_path(raw: bytes) -> tuple[str, str | None]:
    """(path as text, why it is unusable or None)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace"), "path is not valid UTF-8"
    if not is_safe_relative_path(text):
        return text, "path is not a safe relative path"
    return text, None


def list_tree(top: str, ref: str, sha: str, sizes: dict[str, int]) -> list[Listed]:
    """Every entry of the commit's tree; the sizes it carries go into ``sizes``."""
    # Sizes cost git an object lookup per blob. With none known (a first sweep) the
    # listing carries them (-l); otherwise only blobs the previous envelope does not know
    # are asked (a blob's size never changes either).
    with_sizes = not sizes
    done = git_commands.run_git(
        top, "ls-tree", "-r", "-z", *(["-l"] if with_sizes else []), "--full-tree", sha
    )
    if done.returncode != 0:
        raise SourceError(
            codes.SOURCE_UNREADABLE,
            f"repository {top} (ref {ref!r} = {sha}): git ls-tree failed: "
            f"{git_stderr(done)}. Fix: check the repository with git fsck.",
        )
    listing: list[Listed] = []
    for record in done.stdout.split(b"\0"):
        if record:
            meta, _, raw = record.partition(b"\t")
            mode, kind, oid, *size = meta.decode("ascii").split()
            listing.append((mode, kind, oid, raw))
            if size and size[0].isdigit():  # "-" for a submodule's commit
                sizes[oid] = int(size[0])
    return listing


def tree_delta(top: str, old: str, new: str) -> tuple[list[Listed], set[str]] | None:
    """What changed from commit ``old`` to ``new``: the entries added or changed (as
    ``ls-tree`` lists them), and the paths deleted. None when git cannot say (``old``
    is gone, say after a force-push and a gc) or a changed name does not decode
    cleanly: the caller lists the whole tree instead."""
    if not ref_is_sane(old):
        return None
    done = git_commands.run_git(
        top, "diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", old, new, "--"
    )
    if done.returncode != 0:
        return None
    listing: list[Listed] = []
    gone: set[str] = set()
    fields = done.stdout.split(b"\0")
    for meta, raw in zip(fields[0::2], fields[1::2], strict=False):
        if not meta.startswith(b":"):
            return None
        _src_mode, mode, _src_oid, oid, status = meta[1:].decode("ascii").split()
        path, unusable = decode_path(raw)
        if unusable is not None:
            return None  # two such names can collapse to one text: the full listing decides
        if status == "D":
            gone.add(path)
        elif status in ("A", "M", "T"):
            kind = "commit" if mode == "160000" else "tree" if mode == "040000" else "blob"
            listing.append((mode, kind, oid, raw))
        else:
            return None
    return listing, gone


def last_change_times(top: str, sha: str, wanted: set[bytes]) -> dict[bytes, float]:
    """Commit time of the newest commit (in ``git log`` order) touching each wanted
    path, from ONE streamed log pass that stops as soon as every path is dated.
    Paths only touched by merge resolutions stay undated (None): unobserved."""
    found: dict[bytes, float] = {}
    if not wanted:
        return found
    proc = subprocess.Popen(
        git_argv(
            top,
            "log",
            "-z",
            "--no-renames",
            "--no-ext-diff",
            "--name-only",
            "--format=%x00%ct",
            sha,
            "--",
        ),
        env=git_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    # Stream: "\0<ct>\0\n<name>\0<name>\0" per commit. Names are never empty, so an
    # empty token marks a commit header; the first name after it carries one "\n".
    state = "names"
    current: float | None = None
    pending = b""
    try:
        while True:
            data = proc.stdout.read1(1 << 16)  # type: ignore[attr-defined]
            if not data:
                break
            *tokens, pending = (pending + data).split(b"\0")
            for token in tokens:
                if token == b"":
                    state = "time"
                    continue
                if state == "time":
                    current = float(token.decode("ascii"))
                    state = "first"
                    continue
                if state == "first":
                    token = token[1:] if token.startswith(b"\n") else token
                    state = "names"
                if current is not None and token in wanted and token not in found:
                    found[token] = current
                    if len(found) == len(wanted):
                        return found
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.wait()
    return found
