"""One digest of everything besides the declared version that decides a file's chunks: the
parser's own modules (language tables, unit rules, section rules) and the versions of
tree-sitter and every grammar package. It is part of the chunking identity, so an upgrade
that changes any of them re-parses the files it could change instead of keeping their
recorded chunks until a tenant bumps the declared parser version; where the output is the
same, the chunk ids are too, and nothing is sent again."""

import functools
import hashlib
from importlib import metadata
from pathlib import Path

from neo_assets.sources.parsers.grammars import GRAMMARS

PARSERS_DIR = Path(__file__).resolve().parent
# The parser's modules: every .py file in this package except this one.
OWN = Path(__file__).name


def rule_sources() -> list[Path]:
    return sorted(p for p in PARSERS_DIR.glob("*.py") if p.name != OWN)


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "absent"


@functools.cache
def parser_rules_digest() -> str:
    """16 hex: the parser modules' bytes, then tree-sitter's and each grammar's version."""
    digest = hashlib.sha256()
    for path in rule_sources():
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for distribution in sorted({"tree-sitter", *(g.package for g in GRAMMARS.values())}):
        digest.update(f"{distribution}=={_version(distribution)}\0".encode())
    return digest.hexdigest()[:16]
