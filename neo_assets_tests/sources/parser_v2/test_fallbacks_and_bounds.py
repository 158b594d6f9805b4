"""Parser 2.x across languages: syntax errors fall back to windows with a reason, empty
files give nothing, a giant function is split into parts of one unit, and every chunk
stays within the bound."""

import pytest

from neo_assets.sources.rules.syntax_errors import REASON_SYNTAX_ERRORS
from neo_assets_tests.sources.parser_v2.helpers import parse

# One well-formed function per language, as a template for a body of n lines.
FUNCTIONS = {
    "a.js": ("function big() {\n", "  total += {i};\n", "}\n"),
    "a.mjs": ("export function big() {\n", "  total += {i};\n", "}\n"),
    "a.ts": ("function big(): void {\n", "  total += {i};\n", "}\n"),
    "a.tsx": ("function big(): void {\n", "  total += {i};\n", "}\n"),
    "a.go": ("package p\n\nfunc big() {\n", "\ttotal += {i}\n", "}\n"),
    "a.rs": ("fn big() {\n", "    total += {i};\n", "}\n"),
    "A.java": ("class A {\n  void big() {\n", "    total += {i};\n", "  }\n}\n"),
    "a.c": ("void big(void) {\n", "    total += {i};\n", "}\n"),
    "a.cpp": ("void big() {\n", "    total += {i};\n", "}\n"),
    "A.cs": ("class A {\n  void Big() {\n", "    total += {i};\n", "  }\n}\n"),
    "a.rb": ("def big\n", "  total += {i}\n", "end\n"),
    "a.php": ("<?php\nfunction big() {\n", "  $total += {i};\n", "}\n"),
    "a.sh": ("big() {\n", "  total=$((total + {i}))\n", "}\n"),
}
BIG_NAME = {"A.java": "A.big", "A.cs": "A.Big"}

BROKEN = {
    "a.js": "function broken( {\n  if (x {\n    return ]];\n  }\n}\n" * 3,
    "a.ts": "class C {\n  m(: { ) => \n  {{{{\n}\n" * 3,
    "a.go": "package p\n\nfunc broken( {\n\tif x {{\n\treturn ]]\n}\n" * 3,
    "a.rs": "fn broken( {\n    let x = ;;\n    match {\n}\n" * 3,
    "A.java": "class A {\n  void m( {\n    int = ;\n  }\n" * 3,
    "a.c": "int broken( {\n  return ]];\n" * 3,
    "a.cpp": "class C { void m( { ]] };\n" * 3,
    "A.cs": "class A { void M( { int = ; }\n" * 3,
    "a.rb": "def broken(\n  if (\n    ]]\n" * 3,
    "a.php": "<?php\nfunction broken( {\n  $x = ;;\n" * 3,
    "a.sh": "f() {\n  if [ x; then\n  (((\n" * 3,
}


@pytest.mark.parametrize("path", sorted(FUNCTIONS))
def test_giant_function_is_split_into_parts_of_one_unit(path: str) -> None:
    head, line, tail = FUNCTIONS[path]
    text = head + "".join(line.replace("{i}", str(i)) for i in range(400)) + tail
    result = parse(path, text, max_chunk_chars=2000)
    assert result.fallback_reason is None
    name = BIG_NAME.get(path, "big")
    parts = [c for c in result.chunks if c.qualified_name.endswith(name) and c.part]
    n = len(parts)
    assert n >= 3
    assert [c.name for c in parts] == [f"{name} [part {i}/{n}]" for i in range(1, n + 1)]
    assert all(len(c.content) <= 2000 for c in result.chunks)
    # parts are consecutive line ranges of the one unit, in order, each cut at a line end
    for before, after in zip(parts, parts[1:], strict=False):
        assert after.start_line == before.end_line + 1
    for part in parts:
        assert part.content == "\n".join(text.splitlines()[part.start_line - 1 : part.end_line])


@pytest.mark.parametrize("path", sorted(BROKEN))
def test_syntax_errors_fall_back_to_windows_with_a_reason(path: str) -> None:
    text = BROKEN[path]
    result = parse(path, text, window_lines=5)
    assert result.fallback_reason == REASON_SYNTAX_ERRORS
    assert {c.kind for c in result.chunks} == {"text"}
    assert result.chunks[0].name == f"{path}#L1-{result.chunks[0].end_line}"
    # nothing is lost: the windows cover every non-blank line
    joined = "\n".join(c.content for c in result.chunks)
    for line in text.splitlines():
        assert line.strip() == "" or line in joined


def test_a_small_error_keeps_units() -> None:
    good = "".join(f"function f{i}() {{\n  return {i};\n}}\n\n" for i in range(30))
    result = parse("a.js", good + "let x = ;\n")
    assert result.fallback_reason is None
    assert sum(c.kind == "function" for c in result.chunks) == 30


def test_python_syntax_error_falls_back_with_a_reason() -> None:
    result = parse("a.py", "def f(:\n    pass\n")
    assert result.fallback_reason == REASON_SYNTAX_ERRORS
    assert [c.kind for c in result.chunks] == ["text"]


@pytest.mark.parametrize(
    "path",
    [
        *sorted(FUNCTIONS),
        "a.py",
        "a.md",
        "a.rst",
        "a.adoc",
        "a.json",
        "a.yaml",
        "a.toml",
        "a.css",
        "a.txt",
    ],
)
@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_empty_files_give_no_chunks(path: str, text: str) -> None:
    result = parse(path, text)
    assert result.chunks == []
    assert result.fallback_reason is None


def test_a_single_line_longer_than_the_bound_is_sliced() -> None:
    text = "const s = '" + "x" * 5000 + "';\n"
    result = parse("a.js", text, max_chunk_chars=1000)
    assert all(len(c.content) <= 1000 for c in result.chunks)
    assert "".join(c.content for c in result.chunks) == text.rstrip("\n")
    assert {(c.start_line, c.end_line) for c in result.chunks} == {(1, 1)}
