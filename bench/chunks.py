"""Benchmark: how well ``neo-code`` chunks real repositories, 1.0.0 (windows) against
2.0.0 (syntax-aware units).

Run from the repo root: ``python bench/chunks.py REPO_DIR [REPO_DIR ...]``. It never
downloads: each argument is a checked-out repository (or a sparse part of one). Every
file under it (not ``.git``) that the envelope's binary sniffing calls text is chunked
with both parser versions at the sweep's defaults (6,000 characters, 60-line windows).

Measured per repository and version:

- ``whole_unit_share``: of the chunks of code files that are not the module remainder,
  the share that are exactly one whole syntactic unit: the chunk ends on the last line
  of a reference unit (a function, method, class, type or class field found by this
  bench's own tree-sitter walk, see REFERENCE_*), starts at or above its first line, and
  has only comments, decorators or blank lines above it. Parts of a split unit are not
  whole (``part_share``).
- ``functions_cut_share``: of the reference functions and methods (not nested in another
  function), the share whose text is in no single chunk and not merely split into parts
  of its own unit (``functions_in_parts_share`` reports those).
- ``files_per_s``: chunking throughput (the parse only; files are read first).

Measured on (fetched mirrors, checked out under /tmp): spf13/cobra adbc881 (Go),
sindresorhus/ky 3419113 (TypeScript), neomjs/neo 4d2c2ab ``src/`` (JavaScript ``.mjs``),
BurntSushi/walkdir 6fd031c (Rust), and this repository's ``neo_assets/`` for the Python
path. The last stdout line is one JSON object with every figure (and each repo's commit
when it is a git checkout).
"""

import argparse
import ast
import io
import json
import os
import subprocess
import sys
import time
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neo_assets.sources.parsers.grammars import language_for
from neo_assets.sources.parsers.neo_code import PARSER_ID, chunk_file
from neo_assets.sources.parsers.neo_code_v1 import split_lines
from neo_assets.sources.rules.languages import FAMILY_CODE, FAMILY_PYTHON, language_of
from neo_assets.sources.rules.path_rules import decode_text, looks_binary

VERSIONS = ("1.0.0", "2.0.0")
MAX_FILE_BYTES = 1_000_000

# The bench's own idea of a unit, independent of the parser's tables.
_JS_FUNCS = {"function_declaration", "generator_function_declaration", "method_definition"}
_JS_UNITS = {
    "class_declaration",
    "abstract_class_declaration",
    "interface_declaration",
    "enum_declaration",
    "type_alias_declaration",
    "field_definition",
    "public_field_definition",
}
REFERENCE_FUNCTIONS = {
    "javascript": _JS_FUNCS,
    "typescript": _JS_FUNCS,
    "tsx": _JS_FUNCS,
    "go": {"function_declaration", "method_declaration"},
    "rust": {"function_item"},
}
REFERENCE_UNITS = {
    "javascript": _JS_UNITS,
    "typescript": _JS_UNITS,
    "tsx": _JS_UNITS,
    "go": {"type_declaration", "type_spec"},
    "rust": {"struct_item", "enum_item", "trait_item", "impl_item", "type_item", "union_item"},
}
_NESTING = {
    "function_declaration",
    "generator_function_declaration",
    "method_definition",
    "arrow_function",
    "function_expression",
    "function",
    "method_declaration",
    "function_item",
    "func_literal",
    "closure_expression",
}
_JS_FUNCTION_VALUES = {"arrow_function", "function_expression", "function"}


@dataclass
class Ref:
    start: int
    end: int
    function: bool


def reference_units(language: str, source_path: str, text: str) -> tuple[list[Ref], set[int]]:
    """The reference units of a file and the lines of its comments and decorators."""
    if language == "python":
        return _python_refs(text)
    if language not in REFERENCE_FUNCTIONS:
        return [], set()
    from tree_sitter import Parser

    tree = Parser(language_for(language)).parse(text.encode("utf-8", errors="surrogatepass"))
    funcs, units = REFERENCE_FUNCTIONS[language], REFERENCE_UNITS[language]
    out: list[Ref] = []
    notes: set[int] = set()
    stack = [(tree.root_node, False)]
    while stack:
        node, nested = stack.pop()
        t = node.type
        if "comment" in t or t in ("decorator", "attribute_item"):
            notes.update(range(node.start_point.row + 1, _end_row(node) + 1))
        is_func = t in funcs
        if t in ("variable_declarator", "pair") and not nested:
            value = node.child_by_field_name("value")
            is_func = value is not None and value.type in _JS_FUNCTION_VALUES
        if not nested and (is_func or t in units):
            out.append(Ref(node.start_point.row + 1, _end_row(node), is_func))
        inner = nested or t in _NESTING
        stack.extend((c, inner) for c in node.named_children)
    return out, notes


def _end_row(node: Any) -> int:
    row, col = node.end_point.row, node.end_point.column
    return row + 1 if col > 0 or row == node.start_point.row else row


def _python_refs(text: str) -> tuple[list[Ref], set[int]]:
    try:
        tree = ast.parse(text)
        notes = {
            tok.start[0]
            for tok in tokenize.generate_tokens(io.StringIO(text).readline)
            if tok.type == tokenize.COMMENT
        }
    except (SyntaxError, ValueError, RecursionError, tokenize.TokenError):
        return [], set()
    out: list[Ref] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                out.append(Ref(first, node.end_lineno or node.lineno, True))
            elif isinstance(node, ast.ClassDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                out.append(Ref(first, node.end_lineno or node.lineno, False))
                visit(node.body)

    visit(tree.body)
    return out, notes


def _only_notes(lines: list[str], notes: set[int], first: int, last: int) -> bool:
    """True when lines first..last are comments, decorators or blank."""
    return all(n in notes or not lines[n - 1].strip() for n in range(first, last + 1))


def _is_whole(chunk: Any, refs: list[Ref], lines: list[str], notes: set[int]) -> bool:
    """The chunk is one reference unit with the comments above it. A class chunk has
    its members carved out, so it must begin where a class begins and end inside it."""
    for r in refs:
        if r.start < chunk.start_line or not _only_notes(
            lines, notes, chunk.start_line, r.start - 1
        ):
            continue
        if r.end == chunk.end_line:
            return True
        if chunk.kind == "class" and not r.function and r.start <= chunk.end_line <= r.end:
            return True
    return False


def read_files(root: Path) -> list[tuple[str, str]]:
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes()
            if len(data) > MAX_FILE_BYTES or looks_binary(data):
                continue
            files.append((path.relative_to(root).as_posix(), decode_text(data)))
    return files


def measure(files: list[tuple[str, str]], version: str) -> dict[str, Any]:
    started = time.perf_counter()
    results = [chunk_file("bench", "repo", path, text, PARSER_ID, version) for path, text in files]
    elapsed = time.perf_counter() - started
    code_chunks = unit_chunks = whole = parts = 0
    functions = cut = in_parts = 0
    fallbacks: dict[str, int] = {}
    for (path, text), result in zip(files, results, strict=True):
        if result.fallback_reason:
            fallbacks[result.fallback_reason] = fallbacks.get(result.fallback_reason, 0) + 1
        lang = language_of(path)
        if lang.family not in (FAMILY_CODE, FAMILY_PYTHON):
            continue
        lines = split_lines(text)
        refs, notes = reference_units(lang.language, path, text)
        for chunk in result.chunks:
            code_chunks += 1
            if chunk.kind == "module":
                continue
            unit_chunks += 1
            if "[part " in chunk.name or "#part" in chunk.name:
                parts += 1
                continue
            if _is_whole(chunk, refs, lines, notes):
                whole += 1
        for ref in refs:
            if not ref.function:
                continue
            functions += 1
            body = "".join(lines[ref.start - 1 : ref.end]).rstrip("\r\n")
            if any(body in c.content for c in result.chunks):
                continue
            # parts of one unit that together span the function (a class chunk's range
            # spans its carved-out methods too, so only parts are looked at)
            touching = [
                c
                for c in result.chunks
                if "[part " in c.name and c.start_line <= ref.end and c.end_line >= ref.start
            ]
            if (
                touching
                and len({c.qualified_name for c in touching}) == 1
                and min(c.start_line for c in touching) <= ref.start
                and max(c.end_line for c in touching) >= ref.end
            ):
                in_parts += 1
                continue
            cut += 1
    return {
        "files": len(files),
        "chunks": sum(len(r.chunks) for r in results),
        "seconds": round(elapsed, 3),
        "files_per_s": round(len(files) / elapsed, 1) if elapsed else None,
        "code_chunks": code_chunks,
        "unit_chunks": unit_chunks,
        "whole_unit_share": _share(whole, unit_chunks),
        "part_share": _share(parts, unit_chunks),
        "functions": functions,
        "functions_cut_share": _share(cut, functions),
        "functions_in_parts_share": _share(in_parts, functions),
        "fallbacks": fallbacks,
    }


def _share(n: int, d: int) -> float | None:
    return round(n / d, 4) if d else None


def _commit(root: Path) -> str | None:
    done = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repos", nargs="+", type=Path, help="checked-out repository dirs")
    args = parser.parse_args(argv)
    summary: dict[str, Any] = {"bench": "chunks", "repos": {}}
    for root in args.repos:
        files = read_files(root)
        entry: dict[str, Any] = {"path": str(root), "commit": _commit(root)}
        for version in VERSIONS:
            figures = measure(files, version)
            entry[version] = figures
            print(
                f"{root.name:>12} {version}: {figures['files']} files "
                f"{figures['files_per_s']} files/s, whole units {figures['whole_unit_share']}, "
                f"parts {figures['part_share']}, functions {figures['functions']} "
                f"cut {figures['functions_cut_share']} in parts "
                f"{figures['functions_in_parts_share']}, fallbacks {figures['fallbacks']}",
                file=sys.stderr,
            )
        summary["repos"][root.name] = entry
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
