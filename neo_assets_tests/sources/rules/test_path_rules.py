import pytest
from hypothesis import given
from hypothesis import strategies as st

from neo_assets.sources.rules.path_rules import (
    check_exclude_glob,
    decode_text,
    is_excluded,
    is_safe_relative_path,
    looks_binary,
)

# (glob, path, excluded?)
CASES = [
    # anchored directory globs
    ("vendor/**", "vendor/a.js", True),
    ("vendor/**", "vendor/deep/er/a.js", True),
    ("vendor/**", "vendor", False),  # a file named vendor is not "under" vendor/
    ("vendor/**", "src/vendor/a.js", False),  # anchored at the root
    ("vendor/**", "vendored/a.js", False),
    ("/vendor/**", "vendor/a.js", True),
    # ** anywhere
    ("**/node_modules/**", "node_modules/x.js", True),
    ("**/node_modules/**", "a/b/node_modules/x/y.js", True),
    ("**/node_modules/**", "a/node_modules", False),
    ("**/node_modules/**", "a/my_node_modules/x.js", False),
    ("**/*.py", "a.py", True),
    ("**/*.py", "x/y/a.py", True),
    ("**", "anything/at/all.txt", True),
    ("a/**/b", "a/b", True),
    ("a/**/b", "a/x/b", True),
    ("a/**/b", "a/x/y/b", True),
    ("a/**/b", "a/x/y/b/c.txt", True),  # a matched directory excludes its contents
    ("a/**/b", "a/x/yb", False),
    ("a/**/b", "z/a/b", False),
    # unanchored: any depth, file or directory component
    ("*.min.js", "app.min.js", True),
    ("*.min.js", "static/js/app.min.js", True),
    ("*.min.js", "static/js/app.js", False),
    ("*.min.js", "static/x.min.js/inner.txt", True),
    ("node_modules", "node_modules/a.js", True),
    ("node_modules", "pkg/node_modules/a/b.js", True),
    ("node_modules", "pkg/node_modules", True),
    ("node_modules", "pkg/node_modules_x/a.js", False),
    # * and ? never cross a slash
    ("docs/*.md", "docs/a.md", True),
    ("docs/*.md", "docs/sub/a.md", False),
    ("src/?.py", "src/a.py", True),
    ("src/?.py", "src/ab.py", False),
    ("src/?.py", "src//.py", False),
    # anchored literal: a file or everything under a directory
    ("docs/build", "docs/build", True),
    ("docs/build", "docs/build/x.html", True),
    ("docs/build", "x/docs/build", False),
    ("/setup.py", "setup.py", True),
    ("/setup.py", "pkg/setup.py", False),
    # trailing slash: directories only
    ("build/", "build/a.o", True),
    ("build/", "src/build/a.o", True),
    ("build/", "build", False),
    ("build/", "src/build", False),
    # character classes
    ("*.[ch]", "x/a.c", True),
    ("*.[ch]", "x/a.h", True),
    ("*.[ch]", "x/a.o", False),
    ("*.[!ch]", "a.o", True),
    ("*.[!ch]", "a.c", False),
    ("file[0-9].txt", "file7.txt", True),
    ("file[0-9].txt", "filex.txt", False),
    ("a[/]b", "a/b", False),  # a class never matches '/'
    # "**" inside a segment is an ordinary star
    ("a**b", "axxb", True),
    ("a**b", "ax/xb", False),
    # escapes and regex metacharacters are literal
    (r"\*.txt", "*.txt", True),
    (r"\*.txt", "a.txt", False),
    ("a+b(c).txt", "a+b(c).txt", True),
    ("a+b(c).txt", "aab(c).txt", False),
    # unicode and spaces
    ("dos sier/**", "dos sier/é.md", True),
    ("*.md", "naïve dir/é.md", True),
    # case-sensitive
    ("*.MD", "a.md", False),
]


@pytest.mark.parametrize(("glob", "path", "expected"), CASES)
def test_is_excluded_cases(glob: str, path: str, expected: bool) -> None:
    assert is_excluded(path, [glob]) is expected


def test_no_globs_exclude_nothing() -> None:
    assert is_excluded("vendor/a.js", []) is False
    assert is_excluded("vendor/a.js", ()) is False


def test_any_glob_of_several_excludes() -> None:
    globs = ["vendor/**", "*.min.js"]
    assert is_excluded("vendor/x.py", globs)
    assert is_excluded("a/b.min.js", globs)
    assert not is_excluded("a/b.js", globs)


@pytest.mark.parametrize("glob", ["", "   ", "!keep.py", "a/../b", "./a", "a//b", "/", "x\x00y"])
def test_unsupported_globs_are_refused(glob: str) -> None:
    assert check_exclude_glob(glob) is not None
    with pytest.raises(ValueError, match="exclude glob"):
        is_excluded("a.py", [glob])


@pytest.mark.parametrize("glob", ["vendor/**", "*.min.js", "**/x/**", "a[", "build/"])
def test_supported_globs_pass_the_check(glob: str) -> None:
    assert check_exclude_glob(glob) is None


def test_unterminated_class_is_a_literal_bracket() -> None:
    assert is_excluded("a[", ["a["])
    assert not is_excluded("ab", ["a["])


@given(st.lists(st.text(alphabet="abc.", min_size=1, max_size=4), min_size=1, max_size=4))
def test_double_star_excludes_every_path(segments: list[str]) -> None:
    path = "/".join(segments)
    if is_safe_relative_path(path):
        assert is_excluded(path, ["**"])


@given(st.lists(st.text(alphabet="abc.", min_size=1, max_size=4), min_size=1, max_size=4))
def test_unanchored_literal_matches_at_any_depth(segments: list[str]) -> None:
    path = "/".join([*segments, "target.txt"])
    assert is_excluded(path, ["target.txt"])
    assert not is_excluded(path, ["other.txt"])


def test_looks_binary() -> None:
    assert looks_binary(b"abc\x00def")
    assert not looks_binary(b"plain text\n")
    assert not looks_binary(b"")
    assert not looks_binary("é".encode())
    # only the first 8 KiB are sniffed, like git
    assert not looks_binary(b"a" * 8192 + b"\x00")
    assert looks_binary(b"a" * 8191 + b"\x00")


def test_decode_text_replaces_invalid_utf8() -> None:
    assert decode_text(b"ok \xff\xfe end") == "ok \ufffd\ufffd end"
    assert decode_text("é".encode()) == "é"
    assert decode_text(b"") == ""


def test_decode_text_strips_only_a_leading_bom() -> None:
    assert decode_text(b"\xef\xbb\xbfhello") == "hello"
    assert decode_text(b"a\xef\xbb\xbfb") == "a\ufeffb"


@given(st.binary(max_size=256))
def test_decode_text_never_raises(data: bytes) -> None:
    assert isinstance(decode_text(data), str)


@pytest.mark.parametrize(
    ("path", "safe"),
    [
        ("a.py", True),
        ("dir/sub/a.py", True),
        ("dos sier/é.md", True),
        (".hidden/x", True),
        ("a..b/c", True),
        ("", False),
        ("/etc/passwd", False),
        ("../x", False),
        ("a/../../x", False),
        ("a/..", False),
        ("./a", False),
        ("a//b", False),
        ("a/", False),
        ("a\x00b", False),
    ],
)
def test_is_safe_relative_path(path: str, safe: bool) -> None:
    assert is_safe_relative_path(path) is safe
