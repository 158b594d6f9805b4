"""The git reader: the commit a ref names, that commit's tree listed and classified into
an envelope, and its blobs read as text; envelope.py dispatches here. git itself is run by
git_commands.py, the tree listed by git_tree.py, the blobs read by git_blobs.py."""

import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import replace

from neo_assets.core import codes
from neo_assets.sources import git_commands
from neo_assets.sources.git_blobs import CatFile, blob_sizes, read_blobs
from neo_assets.sources.git_commands import git_stderr, ref_is_sane, require_git
from neo_assets.sources.git_tree import (
    Listed,
    decode_path,
    last_change_times,
    list_tree,
    tree_delta,
)
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
from neo_assets.sources.rules.path_rules import decode_text, is_excluded

# Bytes of text blobs a git envelope keeps from classifying them, for the chunk stage
# that reads them next (a first sweep of 2,000 files would read every blob twice).
READ_AHEAD_BYTES = 32 * 1024 * 1024


def git_top_commit(top: str, ref: str | None) -> str | None:
    """The commit ``ref`` (HEAD when None) names when ``top`` is the top of a git work
    tree; None when it holds no .git. Raises SourceError when git cannot read it or the
    ref names no commit."""
    if not os.path.lexists(os.path.join(top, ".git")):
        return None
    shown = ref or "HEAD"
    require_git(top, shown)
    if ref_is_sane(shown):
        # Both questions in one git process (each process costs a sweep); anything but a
        # clean answer goes the two-step way below, for its precise error.
        done = git_commands.run_git(
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
    done = git_commands.run_git(top, "rev-parse", "--show-toplevel")
    if done.returncode != 0:
        raise SourceError(
            codes.SOURCE_UNREADABLE,
            f"repository {top} (ref {shown!r}): git cannot read it: {git_stderr(done)}. "
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
    if not ref_is_sane(ref):
        raise SourceError(
            codes.SOURCE_REPO_MISSING,
            f"repository {top}: ref {ref!r} is not a valid ref. Fix: set ref: to a branch, "
            "tag or commit sha (it may not start with '-').",
        )
    done = git_commands.run_git(top, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if done.returncode != 0:
        raise SourceError(
            codes.SOURCE_REPO_MISSING,
            f"repository {top}: ref {ref!r} does not name a commit "
            f"({git_stderr(done) if done.stderr.strip() else 'unknown revision'}). Fix: set "
            "ref: to an existing branch, tag or commit (fetch it first if it only exists "
            "on a remote), or make a first commit when the repository is empty.",
        )
    return done.stdout.decode("ascii").strip()


_CONTENT_REASONS = frozenset({None, codes.SKIP_BINARY})


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
        blob_sizes(top, {oid for _, kind, oid, _ in listing if kind == "blob"} - set(sizes))
    )
    rows, to_read = _path_verdicts(listing, sizes, exclude, cap)
    unread, reused_times = _reuse_content_verdicts(rows, to_read, previous, is_delta)
    read_ahead = _classify_unread(top, rows, unread)
    times = dict(reused_times)
    times.update(last_change_times(top, sha, {row[0] for row in rows.values()} - set(reused_times)))
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
        delta = tree_delta(top, previous.revision, sha)
        if delta is not None:
            listing, gone = delta
            gone.update(decode_path(raw)[0] for *_, raw in listing)
            return listing, [e for e in previous.entries if e.path not in gone], True
    return list_tree(top, ref, sha, sizes), [], False


def _path_verdicts(
    listing: list[Listed], sizes: dict[str, int], exclude: tuple[str, ...], cap: int
) -> tuple[_Rows, list[str]]:
    """Each listed path's verdict from its name, mode and size alone, and the paths whose
    content must be classified."""
    rows: _Rows = {}
    to_read: list[str] = []
    for mode, _kind, oid, raw in listing:
        size = sizes.get(oid, 0)  # 0 for a submodule's commit or a missing object
        path, unusable = decode_path(raw)
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

    read_blobs(top, [(path, rows[path][1]) for path in unread], classify)
    return read_ahead


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
    with CatFile(envelope.root) as cat:
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
