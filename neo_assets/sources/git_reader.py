"""The git reader: a commit's tree listed and classified, and its blobs read, through git
(``ls-tree``, ``diff-tree``, ``log``, ``cat-file --batch``); envelope.py dispatches here."""

import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import IO

from neo_assets.core import codes
from neo_assets.sources.model import (
    Envelope,
    FileEntry,
    SourceError,
    classify_content,
    yielded_entry,
)
from neo_assets.sources.rules.envelope_reuse import (
    envelope_rules,
    recorded_envelope_extends,
    recorded_envelope_holds,
)
from neo_assets.sources.rules.path_rules import decode_text, is_excluded, is_safe_relative_path

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
# Bytes of text blobs a git envelope keeps from classifying them, for the chunk stage
# that reads them next (a first sweep of 2,000 files would read every blob twice).
READ_AHEAD_BYTES = 32 * 1024 * 1024


def _decode_path(raw: bytes) -> tuple[str, str | None]:
    """(path as text, why it is unusable or None)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace"), "path is not valid UTF-8"
    if not is_safe_relative_path(text):
        return text, "path is not a safe relative path"
    return text, None


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_REDIRECT_VARS}
    # No prompts, no optional index locks (we only read), stable English messages.
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"})
    return env


def _git_argv(top: str, *args: str) -> list[str]:
    return ["git", "-C", top, "-c", "log.showSignature=false", *args]


def _git(top: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        _git_argv(top, *args),
        env=_git_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )


def _git_stderr(done: subprocess.CompletedProcess[bytes]) -> str:
    return done.stderr.decode("utf-8", errors="replace").strip() or f"exit {done.returncode}"


def _ref_is_sane(ref: str) -> bool:
    # A leading '-' would be read as an option; control characters are never in refs.
    return bool(ref) and not ref.startswith("-") and all(c >= " " and c != "\x7f" for c in ref)


def _require_git(top: str, ref: str) -> None:
    if shutil.which("git") is None:
        raise SourceError(
            codes.SOURCE_UNREADABLE,
            f"repository {top} (ref {ref!r}) is a git work tree but the git executable "
            "was not found on PATH. Fix: install git (e.g. apt-get install git) or put it "
            "on PATH for the process running the sweep.",
        )


def git_top_commit(top: str, ref: str | None) -> str | None:
    """The commit ``ref`` (HEAD when None) names when ``top`` is the top of a git work
    tree; None when it holds no .git. Raises SourceError when git cannot read it or the
    ref names no commit."""
    if not os.path.lexists(os.path.join(top, ".git")):
        return None
    shown = ref or "HEAD"
    _require_git(top, shown)
    if _ref_is_sane(shown):
        # Both questions in one git process (each costs a sweep ~3 ms); anything but a
        # clean answer goes the two-step way below, for its precise error.
        done = _git(
            top, "rev-parse", "--show-toplevel", "--verify", "--quiet", f"{shown}^{{commit}}"
        )
        lines = done.stdout.decode("utf-8", errors="surrogateescape").split("\n")
        if done.returncode == 0 and len(lines) == 3 and not lines[2]:
            toplevel, commit = lines[0], lines[1].strip()
            if os.path.realpath(toplevel) == top and commit.isascii() and commit.isalnum():
                return commit
    _check_git_top(top, shown)
    return _resolve_commit(top, shown)


def _check_git_top(top: str, shown: str) -> None:
    done = _git(top, "rev-parse", "--show-toplevel")
    if done.returncode != 0:
        raise SourceError(
            codes.SOURCE_UNREADABLE,
            f"repository {top} (ref {shown!r}): git cannot read it: {_git_stderr(done)}. "
            "Fix: repair the repository (git fsck), or if git reports 'dubious ownership', "
            "run the sweep as the repository's owner or add it with "
            f"`git config --global --add safe.directory {top}`.",
        )
    toplevel = done.stdout.decode("utf-8", errors="surrogateescape").strip()
    if os.path.realpath(toplevel) != top:
        raise SourceError(
            codes.SOURCE_UNREADABLE,
            f"repository {top} (ref {shown!r}) holds a .git entry but git resolves the "
            f"work tree to {toplevel}. Fix: point path at {toplevel}, or remove the stray "
            f".git from {top} to read it as a plain directory.",
        )


def _resolve_commit(top: str, ref: str) -> str:
    if not _ref_is_sane(ref):
        raise SourceError(
            codes.SOURCE_REPO_MISSING,
            f"repository {top}: ref {ref!r} is not a valid ref. Fix: set ref: to a branch, "
            "tag or commit sha (it may not start with '-').",
        )
    done = _git(top, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if done.returncode != 0:
        raise SourceError(
            codes.SOURCE_REPO_MISSING,
            f"repository {top}: ref {ref!r} does not name a commit "
            f"({_git_stderr(done) if done.stderr.strip() else 'unknown revision'}). Fix: set "
            "ref: to an existing branch, tag or commit (fetch it first if it only exists "
            "on a remote), or make a first commit when the repository is empty.",
        )
    return done.stdout.decode("ascii").strip()


class _CatFile:
    """One long-lived ``git cat-file --batch``: raw blob bytes by object id, in request
    order (no filters, no textconv: exactly what the commit holds)."""

    def __init__(self, top: str) -> None:
        self._top = top
        self._proc = subprocess.Popen(
            _git_argv(top, "cat-file", "--batch"),
            env=_git_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._stdin: IO[bytes] = self._proc.stdin
        self._stdout: IO[bytes] = self._proc.stdout

    def read(self, oid: str) -> bytes | None:
        """The blob's bytes, or None when the object is missing or not a blob."""
        try:
            self._stdin.write(oid.encode("ascii") + b"\n")
            self._stdin.flush()
        except BrokenPipeError as exc:
            raise SourceError(
                codes.SOURCE_UNREADABLE,
                f"repository {self._top}: git cat-file exited while reading {oid}. Fix: "
                "check the repository with git fsck.",
            ) from exc
        return self._answer(oid)

    def read_many(self, oids: Sequence[str]) -> Iterator[tuple[str, bytes | None]]:
        """Each blob's bytes (or None), in order. A feeder thread writes every request
        ahead, so git answers back to back instead of one round trip per blob (on a first
        sweep of 2,000 files that wait was most of reading them)."""

        def feed() -> None:
            try:
                for oid in oids:
                    self._stdin.write(oid.encode("ascii") + b"\n")
                self._stdin.flush()
            except (OSError, ValueError):
                pass  # git exited (or we closed it): the reader reports what it lacks

        feeder = threading.Thread(target=feed, name="git-cat-file-feed", daemon=True)
        feeder.start()
        answered = 0
        try:
            for oid in oids:
                yield oid, self._answer(oid)
                answered += 1
        finally:
            if answered < len(oids):
                # The reader stopped early: git may be blocked writing answers nobody
                # reads, and the feeder blocked writing requests git no longer reads.
                self._proc.kill()
            feeder.join()

    def _answer(self, oid: str) -> bytes | None:
        header = self._stdout.readline()
        if not header.endswith(b"\n"):
            raise SourceError(
                codes.SOURCE_UNREADABLE,
                f"repository {self._top}: git cat-file stopped answering at {oid}. Fix: "
                "check the repository with git fsck.",
            )
        parts = header.split()
        if len(parts) != 3:
            return None  # "<oid> missing" / "<oid> ambiguous"
        size = int(parts[2])
        data = self._stdout.read(size)
        self._stdout.read(1)  # the newline after the content
        if len(data) != size:
            raise SourceError(
                codes.SOURCE_UNREADABLE,
                f"repository {self._top}: git cat-file returned a truncated {oid}.",
            )
        return data if parts[1] == b"blob" else None

    def close(self) -> None:
        try:
            self._stdin.close()  # git ends at end of input
        except BrokenPipeError:
            pass  # git is gone already (killed after an early stop, or it failed)
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._stdout.close()

    def __enter__(self) -> "_CatFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_CONTENT_REASONS = frozenset({None, codes.SKIP_BINARY})

# One entry of a tree as git lists it: (mode, object type, object id, raw path).
Listed = tuple[str, str, str, bytes]

# Blobs are read by this many ``cat-file`` processes at once when there are at least
# PARALLEL_READ_MIN of them: git inflates each loose object on one core, and on a first
# sweep that read was most of the envelope (2,000 files: 0.15 s with one reader).
BLOB_READERS = 2
PARALLEL_READ_MIN = 256


def _read_blobs(
    top: str, wanted: Sequence[tuple[str, str]], visit: Callable[[str, bytes | None], None]
) -> None:
    """``visit(path, bytes or None)`` for each ``(path, object id)`` of ``wanted``,
    streaming (no blob is held here). With many blobs, contiguous parts are read by
    ``BLOB_READERS`` processes at once, and ``visit`` is called from as many threads, in
    order within a part; the first error of any part is raised once all have ended."""

    def read(part: Sequence[tuple[str, str]]) -> None:
        with _CatFile(top) as cat:
            answers = cat.read_many([oid for _, oid in part])
            for (path, _oid), (_, data) in zip(part, answers, strict=True):
                visit(path, data)

    if not wanted:
        return  # nothing new: no git process at all
    readers = BLOB_READERS if len(wanted) >= PARALLEL_READ_MIN else 1
    step = -(-len(wanted) // readers)
    parts = [wanted[i : i + step] for i in range(0, len(wanted), step)]
    if len(parts) <= 1:
        read(wanted)
        return
    errors: list[BaseException] = []

    def read_part(part: Sequence[tuple[str, str]]) -> None:
        try:
            read(part)
        except BaseException as exc:  # noqa: BLE001 - raised below, in the caller
            errors.append(exc)

    others = [
        threading.Thread(target=read_part, args=(part,), name="git-blob-reader", daemon=True)
        for part in parts[1:]
    ]
    for thread in others:
        thread.start()
    read_part(parts[0])
    for thread in others:
        thread.join()
    if errors:
        raise errors[0]


def _known_sizes(previous: Envelope | None) -> dict[str, int]:
    """Blob sizes the previous envelope recorded, by object id. A missing object was
    recorded as 0 and skipped unreadable: that one is asked again."""
    if previous is None:
        return {}
    return {
        e.blob: e.size
        for e in previous.entries
        if e.blob and (e.size > 0 or e.skip_reason in _CONTENT_REASONS)
    }


def _blob_sizes(top: str, oids: set[str]) -> dict[str, int]:
    """Sizes by object id from one ``git cat-file --batch-check`` (object headers only).
    A missing object is left out (``ls-tree -l`` shows it as BAD); its read then finds it
    missing and skips the path as unreadable."""
    if not oids:
        return {}
    done = subprocess.run(
        _git_argv(top, "cat-file", "--batch-check"),
        env=_git_env(),
        input="".join(f"{oid}\n" for oid in sorted(oids)).encode("ascii"),
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise SourceError(
            codes.SOURCE_UNREADABLE,
            f"repository {top}: git cat-file --batch-check failed: {_git_stderr(done)}. "
            "Fix: check the repository with git fsck.",
        )
    sizes: dict[str, int] = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == b"blob" and parts[2].isdigit():
            sizes[parts[0].decode("ascii")] = int(parts[2])
    return sizes


# path -> (raw path, object id, size, skip reason, skip detail)
_Rows = dict[str, tuple[bytes, str, int, str | None, str | None]]


def git_envelope(
    top: str,
    ref: str,
    sha: str,
    exclude: tuple[str, ...],
    cap: int,
    previous: Envelope | None = None,
) -> Envelope:
    rules = envelope_rules(exclude, cap)
    if previous is not None and recorded_envelope_holds(
        recorded_revision=previous.revision,
        recorded_rules=previous.rules,
        recorded_skip_reasons=(e.skip_reason for e in previous.entries),
        revision=sha,
        rules=rules,
    ):
        return replace(previous, root=top, read_ahead={})
    sizes = _known_sizes(previous)
    listing, carried, is_delta = _listing(top, ref, sha, previous, rules, sizes)
    sizes.update(
        _blob_sizes(top, {oid for _, kind, oid, _ in listing if kind == "blob"} - set(sizes))
    )
    rows, to_read = _path_verdicts(listing, sizes, exclude, cap)
    unread, reused_times = _reuse_content_verdicts(rows, to_read, previous, is_delta)
    read_ahead = _classify_unread(top, rows, unread)
    times = dict(reused_times)
    times.update(
        _last_change_times(top, sha, {row[0] for row in rows.values()} - set(reused_times))
    )
    listed = [
        FileEntry(
            path=path,
            size=size,
            blob=oid,
            yielded=reason is None,
            skip_reason=reason,
            changed_at=times.get(raw),
            skip_detail=detail,
        )
        for path, (raw, oid, size, reason, detail) in rows.items()
    ]
    entries = tuple(sorted([*carried, *listed]))
    return Envelope(
        kind="git", root=top, revision=sha, entries=entries, read_ahead=read_ahead, rules=rules
    )


def _listing(
    top: str,
    ref: str,
    sha: str,
    previous: Envelope | None,
    rules: str,
    sizes: dict[str, int],
) -> tuple[list[Listed], list[FileEntry], bool]:
    """What to classify: the commit's whole tree, or (when the recorded envelope's rules
    are these) only the paths git diff lists as changed since it, with the entries of the
    paths that did not change carried over. Also whether it is such a delta."""
    if previous is not None and recorded_envelope_extends(
        recorded_revision=previous.revision,
        recorded_rules=previous.rules,
        recorded_skip_reasons=(e.skip_reason for e in previous.entries),
        rules=rules,
    ):
        delta = _tree_delta(top, previous.revision, sha)
        if delta is not None:
            listing, gone = delta
            gone.update(_decode_path(raw)[0] for *_, raw in listing)
            return listing, [e for e in previous.entries if e.path not in gone], True
    return _list_tree(top, ref, sha, sizes), [], False


def _path_verdicts(
    listing: list[Listed], sizes: dict[str, int], exclude: tuple[str, ...], cap: int
) -> tuple[_Rows, list[str]]:
    """Each listed path's verdict from its name, mode and size alone, and the paths whose
    content must be classified."""
    rows: _Rows = {}
    to_read: list[str] = []
    for mode, _kind, oid, raw in listing:
        size = sizes.get(oid, 0)  # 0 for a submodule's commit or a missing object
        path, unusable = _decode_path(raw)
        if path in rows:
            continue  # two undecodable names collapsed to one text: keep the first
        reason: str | None
        detail: str | None = None
        if unusable is not None:
            reason, detail = codes.SKIP_UNREADABLE, unusable
        elif is_excluded(path, exclude):
            reason = codes.SKIP_EXCLUDED
        elif mode == "120000":
            reason = codes.SKIP_SYMLINK
        elif mode == "160000":
            reason = codes.SKIP_SUBMODULE
        elif not mode.startswith("100"):
            reason = codes.SKIP_NOT_REGULAR
        elif size > cap:
            reason = codes.SKIP_TOO_LARGE
        else:
            reason = None
            to_read.append(path)
        rows[path] = (raw, oid, size, reason, detail)
    return rows, to_read


def _reuse_content_verdicts(
    rows: _Rows, to_read: list[str], previous: Envelope | None, is_delta: bool
) -> tuple[list[str], dict[bytes, float]]:
    """Content verdicts of the previous envelope reused by object id (a blob's bytes never
    change); the paths still to read, and the change times kept."""
    known: dict[str, FileEntry] = {}
    if previous is not None:
        known = {
            e.blob: e for e in previous.entries if e.skip_reason in _CONTENT_REASONS and e.blob
        }
    unread: list[str] = []
    reused_times: dict[bytes, float] = {}
    for path in to_read:
        raw, oid, size, _reason, _detail = rows[path]
        seen = known.get(oid)
        if seen is None:
            unread.append(path)
            continue
        rows[path] = (raw, oid, size, seen.skip_reason, None)
        # Every path of a delta was touched since (a mode change keeps the blob): dated
        # by git; in a whole listing, the same blob at the same path keeps its date.
        if seen.changed_at is not None and seen.path == path and not is_delta:
            reused_times[raw] = seen.changed_at
    return unread, reused_times


def _classify_unread(top: str, rows: _Rows, unread: list[str]) -> dict[str, bytes]:
    """Read and classify the unread paths' blobs (verdicts into ``rows``); the bytes of
    yielded ones kept up to READ_AHEAD_BYTES, so the chunk stage need not read them again."""
    read_ahead: dict[str, bytes] = {}
    budget = [READ_AHEAD_BYTES]
    kept = threading.Lock()

    def classify(path: str, data: bytes | None) -> None:
        raw, oid, size, _reason, _detail = rows[path]
        if data is None:
            rows[path] = (raw, oid, size, codes.SKIP_UNREADABLE, "git object missing")
            return
        verdict = classify_content(data)
        rows[path] = (raw, oid, size, verdict, None)
        if verdict is None:
            with kept:
                if len(data) <= budget[0] and oid not in read_ahead:
                    read_ahead[oid] = data
                    budget[0] -= len(data)

    _read_blobs(top, [(path, rows[path][1]) for path in unread], classify)
    return read_ahead


def _list_tree(top: str, ref: str, sha: str, sizes: dict[str, int]) -> list[Listed]:
    """Every entry of the commit's tree; the sizes it carries go into ``sizes``."""
    # Sizes cost git an object lookup per blob. With none known (a first sweep) the
    # listing carries them (-l); otherwise only blobs the previous envelope does not know
    # are asked (a blob's size never changes either).
    with_sizes = not sizes
    done = _git(top, "ls-tree", "-r", "-z", *(["-l"] if with_sizes else []), "--full-tree", sha)
    if done.returncode != 0:
        raise SourceError(
            codes.SOURCE_UNREADABLE,
            f"repository {top} (ref {ref!r} = {sha}): git ls-tree failed: "
            f"{_git_stderr(done)}. Fix: check the repository with git fsck.",
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


def _tree_delta(top: str, old: str, new: str) -> tuple[list[Listed], set[str]] | None:
    """What changed from commit ``old`` to ``new``: the entries added or changed (as
    ``ls-tree`` lists them), and the paths deleted. None when git cannot say (``old``
    is gone, say after a force-push and a gc) or a changed name does not decode
    cleanly: the caller lists the whole tree instead."""
    if not _ref_is_sane(old):
        return None
    done = _git(top, "diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", old, new, "--")
    if done.returncode != 0:
        return None
    listing: list[Listed] = []
    gone: set[str] = set()
    fields = done.stdout.split(b"\0")
    for meta, raw in zip(fields[0::2], fields[1::2], strict=False):
        if not meta.startswith(b":"):
            return None
        _src_mode, mode, _src_oid, oid, status = meta[1:].decode("ascii").split()
        path, unusable = _decode_path(raw)
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


def _last_change_times(top: str, sha: str, wanted: set[bytes]) -> dict[bytes, float]:
    """Commit time of the newest commit (in ``git log`` order) touching each wanted
    path, from ONE streamed log pass that stops as soon as every path is dated.
    Paths only touched by merge resolutions stay undated (None): unobserved."""
    found: dict[bytes, float] = {}
    if not wanted:
        return found
    proc = subprocess.Popen(
        _git_argv(
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
        env=_git_env(),
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


def git_read_texts(envelope: Envelope, paths: Iterable[str]) -> Iterator[tuple[str, str]]:
    entries = [yielded_entry(envelope, path) for path in paths]
    kept = envelope.read_ahead
    # What the envelope kept is handed over once (then dropped: its memory is the
    # sweep's); the rest is asked of git, in order, through one cat-file.
    ahead = {e.blob: kept[e.blob] for e in entries if e.blob in kept}
    for oid in ahead:
        del kept[oid]
    asked = [e for e in entries if e.blob not in ahead]
    if not asked:
        for entry in entries:
            yield entry.path, decode_text(ahead[entry.blob])
        return
    with _CatFile(envelope.root) as cat:
        answers = cat.read_many([e.blob for e in asked])
        try:
            for entry in entries:
                if entry.blob in ahead:
                    yield entry.path, decode_text(ahead[entry.blob])
                    continue
                _oid, data = next(answers)
                path = entry.path
                if data is None:
                    raise SourceError(
                        codes.SOURCE_UNREADABLE,
                        f"repository {envelope.root} (revision {envelope.revision}): blob "
                        f"{entry.blob} of {path!r} is no longer in the object store. Fix: "
                        "re-run the sweep so the envelope is rebuilt from the current ref.",
                    )
                yield path, decode_text(data)
        finally:
            answers.close()  # a reader that stopped early stops git at once
