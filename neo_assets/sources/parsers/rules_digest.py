"""One digest of everything besides the declared version that decides a file's chunks: the
parser's own modules (language tables, unit rules, section rules), the pure source rules
they read (sources/rules: languages, chunk kinds, line parts, windows) and the versions of
tree-sitter and every grammar package. It is part of the chunking identity, so an upgrade
that changes any of them re-parses the files it could change instead of keeping their
recorded chunks until a tenant bumps the declared parser version; where the output is the
same, the chunk ids are too, and nothing is sent again."""

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


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "absent"


@functools.cache
def parser_rules_digest() -> str:
    """16 hex: the parser modules' bytes, then tree-sitter's and each grammar's version."""
    digest = hashlib.sha256()
    for index, folder in enumerate(rule_dirs()):
        for path in sorted(folder.glob("*.py")):
            if path.resolve() != OWN:
                name = f"{index}/{path.name}".encode()
                digest.update(name + b"\0" + path.read_bytes() + b"\0")
    for distribution in sorted({"tree-sitter", *(g.package for g in GRAMMARS.values())}):
        digest.update(f"{distribution}=={_version(distribution)}\0".encode())
    return digest.hexdigest()[:16]
