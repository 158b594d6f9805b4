"""Rules over repository paths and raw file bytes: exclusion globs (a gitignore subset),
binary sniffing, text decoding and path safety. Pure.
Glob syntax: docs/design/sources.md#exclude-globs"""

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
    """True when any glob names ``path`` (POSIX, relative to the root) or one of its parents;
    ValueError for an unsupported glob."""
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


# Leading bytes of formats that are never source text, even when their first 8 KiB hold
# no NUL (a PDF or Illustrator file often opens with kilobytes of XMP text).
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "pdf"),
    (b"%!PS", "postscript"),  # PostScript, EPS and pre-PDF Adobe Illustrator
    (b"\xc5\xd0\xd3\xc6", "postscript"),  # DOS EPS binary header
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
    (b"8BPS", "psd"),
    (b"\x00\x00\x01\x00", "ico"),
    (b"RIFF", "riff"),  # WebP, WAV, AVI
    (b"ID3", "mp3"),
    (b"OggS", "ogg"),
    (b"fLaC", "flac"),
    (b"PK\x03\x04", "zip"),  # also jar, docx, xlsx, apk, epub
    (b"PK\x05\x06", "zip"),
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"Rar!\x1a\x07", "rar"),
    (b"\x7fELF", "elf"),
    (b"\xfe\xed\xfa\xce", "mach-o"),
    (b"\xfe\xed\xfa\xcf", "mach-o"),
    (b"\xce\xfa\xed\xfe", "mach-o"),
    (b"\xcf\xfa\xed\xfe", "mach-o"),
    (b"\xca\xfe\xba\xbe", "mach-o"),  # fat binary; Java class files share it
    (b"\x00asm", "wasm"),
    (b"SQLite format 3\x00", "sqlite"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "ole"),  # .doc, .xls, .msi
    (b"wOFF", "woff"),
    (b"wOF2", "woff"),
    (b"\x00\x01\x00\x00\x00", "truetype"),
    (b"OTTO", "opentype"),
    (b"PAR1", "parquet"),
    (b"\x1bLua", "lua-bytecode"),
)
# Control bytes that text does carry: tab, line feed, vertical tab, form feed, carriage
# return, backspace and escape (ANSI colours in logs).
_TEXT_CONTROLS = frozenset(b"\t\n\x0b\x0c\r\x08\x1b")
_CONTROL_BYTES = bytes(b for b in range(32) if b not in _TEXT_CONTROLS) + b"\x7f"
# More than this share of other control bytes in the sniffed head: not text.
CONTROL_BYTE_RATIO = 0.10
_IDENTITY = bytes.maketrans(b"", b"")


def binary_signature(head: bytes) -> str | None:
    """Why the first 8 KiB are not text: a format's magic number (``"pdf"``, ``"png"``,
    ...), ``"nul"`` (a NUL byte, git's own heuristic) or ``"control-bytes"`` (more than
    CONTROL_BYTE_RATIO of bytes that text does not carry); None for text."""
    sniff = head[:BINARY_SNIFF_BYTES]
    for magic, name in _MAGIC:
        if sniff.startswith(magic):
            return name
    if sniff.startswith(b"MZ") and len(sniff) >= 64 and _controls(sniff[:64]) > 0:
        return "pe"  # a DOS/PE header is mostly control bytes; "MZ..." prose is not
    if b"\x00" in sniff:
        return "nul"
    if sniff and _controls(sniff) > CONTROL_BYTE_RATIO * len(sniff):
        return "control-bytes"
    return None


def _controls(data: bytes) -> int:
    return len(data) - len(data.translate(_IDENTITY, _CONTROL_BYTES))


def looks_binary(head: bytes) -> bool:
    """True when the first 8 KiB are not text (see ``binary_signature``)."""
    return binary_signature(head) is not None


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
