"""One digest of everything besides the declared version that decides a file's chunks (the
parser's modules, the source rules they read, tree-sitter's and the grammars' versions),
part of the chunking identity: an upgrade that could change a file's chunks re-parses it."""

import ast
import functools
import hashlib
from importlib import metadata
from pathlib import Path

from neo_assets.sources import rules as source_rules
from neo_assets.sources.parsers.grammars import GRAMMARS

PARSERS_DIR = Path(__file__).resolve().parent
SOURCE_RULES_DIR = Path(source_rules.__file__).resolve().parent
# Every .py file of the parser package (but this one) and of the source rules.
OWN = Path(__file__).resolve()


def rule_dirs() -> tuple[Path, ...]:
    return (PARSERS_DIR, SOURCE_RULES_DIR)


def code_of(source: bytes) -> bytes:
    """The module's code without its comments, docstrings and layout: rewording what the
    rules say about themselves decides no chunk, so it must not re-parse every repo."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False).encode()


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "absent"


@functools.cache
def parser_rules_digest() -> str:
    """16 hex: the parser modules' code, then tree-sitter's and each grammar's version."""
    digest = hashlib.sha256()
    for index, folder in enumerate(rule_dirs()):
        for path in sorted(folder.glob("*.py")):
            if path.resolve() != OWN:
                name = f"{index}/{path.name}".encode()
                digest.update(name + b"\0" + code_of(path.read_bytes()) + b"\0")
    for distribution in sorted({"tree-sitter", *(g.package for g in GRAMMARS.values())}):
        digest.update(f"{distribution}=={_version(distribution)}\0".encode())
    return digest.hexdigest()[:16]
