"""Rules over repository paths and raw file bytes: exclusion globs, binary sniffing,
text decoding and path safety. Pure functions, no file system access.

Exclude glob semantics (a gitignore subset, matched against POSIX paths relative to
the repository root, case-sensitive):

- ``*`` matches any run of characters except ``/``; ``?`` one character except ``/``;
  ``[abc]`` / ``[a-z]`` / ``[!abc]`` a character class (never ``/``); ``\\x`` a literal x.
- ``**`` as a whole segment spans directories: ``**/x`` matches ``x`` at any depth,
  ``a/**/b`` matches ``a/b``, ``a/x/b``, ``a/x/y/b``, and a trailing ``a/**`` matches
  everything under ``a/`` (not a file named ``a``). ``**`` inside a segment (``a**b``)
  is an ordinary ``*``.
- A pattern with no ``/`` except a trailing one (``*.min.js``, ``node_modules``,
  ``build/``) matches a path component at any depth. A pattern with a ``/`` anywhere
  else (``vendor/**``, ``docs/build``, ``/setup.py``) is anchored at the root; a leading
  ``/`` only anchors.
- A pattern that matches a directory excludes everything under it: ``docs/build``
  excludes ``docs/build/a.txt``; ``node_modules`` excludes ``x/node_modules/y.js``.
- A trailing ``/`` restricts the pattern to directories: ``build/`` excludes
  ``a/build/x`` but not a file named ``a/build``.
- Not supported, refused with ValueError: negation (``!x``), empty patterns, NUL,
  and ``.``/``..`` segments.
"""

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

BINARY_SNIFF_BYTES = 8192
_UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class _CompiledExcludes:
    any_path: re.Pattern[str] | None  # matched against the path and its directory prefixes
    dirs_only: re.Pattern[str] | None  # matched against directory prefixes only


def check_exclude_glob(pattern: str) -> str | None:
    """Why ``pattern`` is not an acceptable exclude glob, or None when it is."""
    if not isinstance(pattern, str):
        return "an exclude glob must be a string"
    if not pattern.strip():
        return "an exclude glob must not be empty"
    if "\x00" in pattern:
        return "an exclude glob must not contain NUL"
    if pattern.startswith("!"):
        return "negated globs ('!pattern') are not supported; list only what to exclude"
    body = pattern.strip("/")
    if not body:
        return "an exclude glob must name something ('/' alone matches nothing)"
    if any(seg in (".", "..") for seg in body.split("/")):
        return "an exclude glob must not contain '.' or '..' segments"
    if "//" in body:
        return "an exclude glob must not contain empty segments ('//')"
    try:
        re.compile(_translate(pattern)[0])
    except re.error as exc:  # e.g. a malformed character class
        return f"an exclude glob must be a valid pattern ({exc})"
    return None


def _translate_segment(seg: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(seg):
        c = seg[i]
        if c == "*":
            while i + 1 < len(seg) and seg[i + 1] == "*":
                i += 1  # "a**b" is an ordinary star
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "\\" and i + 1 < len(seg):
            i += 1
            out.append(re.escape(seg[i]))
        elif c == "[":
            j = i + 1
            if j < len(seg) and seg[j] in "!^":
                j += 1
            if j < len(seg) and seg[j] == "]":
                j += 1  # a leading ']' is literal inside the class
            while j < len(seg) and seg[j] != "]":
                j += 1
            if j >= len(seg):
                out.append(re.escape(c))  # unterminated: a literal '['
            else:
                inner = seg[i + 1 : j]
                negate = inner[:1] in ("!", "^")
                if negate:
                    inner = inner[1:]
                inner = inner.replace("\\", "\\\\").replace("[", "\\[")
                out.append(f"(?![/])[{'^' if negate else ''}{inner}]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _translate(pattern: str) -> tuple[str, bool]:
    """(regex fully matching the paths the pattern names, whether it names dirs only)."""
    dir_only = pattern.endswith("/")
    body = pattern.rstrip("/")
    anchored = body.startswith("/") or "/" in body
    segs = body.lstrip("/").split("/")
    rx = "" if anchored else "(?:.*/)?"
    need_sep = False
    for i, seg in enumerate(segs):
        last = i == len(segs) - 1
        sep = "/" if need_sep else ""
        if seg == "**":
            if last:
                rx += sep + ".+"
            else:
                rx += sep + "(?:.*/)?"
                need_sep = False
            continue
        rx += sep + _translate_segment(seg)
        need_sep = True
    return rx, dir_only


@functools.lru_cache(maxsize=256)
def _compile(globs: tuple[str, ...]) -> _CompiledExcludes:
    any_path: list[str] = []
    dirs_only: list[str] = []
    for pattern in globs:
        problem = check_exclude_glob(pattern)
        if problem is not None:
            raise ValueError(f"exclude glob {pattern!r}: {problem}")
        rx, dir_only = _translate(pattern)
        (dirs_only if dir_only else any_path).append(rx)

    def join(parts: list[str]) -> re.Pattern[str] | None:
        return re.compile("|".join(f"(?:{p})" for p in parts), re.DOTALL) if parts else None

    return _CompiledExcludes(any_path=join(any_path), dirs_only=join(dirs_only))


def is_excluded(path: str, exclude_globs: Sequence[str]) -> bool:
    """True when any glob names ``path`` or one of its parent directories.

    ``path`` is POSIX and relative to the repository root. Raises ValueError for an
    unsupported glob (see the module docstring and ``check_exclude_glob``).
    """
    if not exclude_globs:
        return False
    compiled = _compile(tuple(exclude_globs))
    segs = path.split("/")
    dirs = ["/".join(segs[:n]) for n in range(1, len(segs))]
    if compiled.any_path is not None:
        if compiled.any_path.fullmatch(path) or any(compiled.any_path.fullmatch(d) for d in dirs):
            return True
    if compiled.dirs_only is not None:
        if any(compiled.dirs_only.fullmatch(d) for d in dirs):
            return True
    return False


def looks_binary(head: bytes) -> bool:
    """True when the first 8 KiB hold a NUL byte (git's own heuristic)."""
    return b"\x00" in head[:BINARY_SNIFF_BYTES]


def decode_text(data: bytes) -> str:
    """UTF-8 with invalid bytes replaced by U+FFFD and a leading BOM dropped; never
    raises."""
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    return data.decode("utf-8", errors="replace")


def is_safe_relative_path(path: str) -> bool:
    """True for a non-empty POSIX relative path with no NUL, no leading '/', and no
    empty, '.' or '..' segment: a path that cannot name anything outside its root."""
    if not isinstance(path, str) or not path or "\x00" in path or path.startswith("/"):
        return False
    return all(seg not in ("", ".", "..") for seg in path.split("/"))
