"""The tenants file's pure rules: what an id, a version, a git ref and an exclude glob
may be, and why a value is not one, in words a person can act on. No I/O."""

import re
import unicodedata

# The documented form; matching uses fullmatch + ASCII so "acme\n", " acme", a Cyrillic
# "а" or a fullwidth "１" can never pass (``match`` + ``$`` accepts a trailing newline).
ID_PATTERN = "^[a-z0-9][a-z0-9-]{0,62}$"
_ID_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,62}", re.ASCII)
_ID_ALLOWED = (
    f"an id matching {ID_PATTERN}: 1-63 characters, lowercase ASCII letters a-z, "
    "digits 0-9 and '-', not starting with '-'"
)

# semver.org's grammar, ASCII only.
_SEMVER_RE = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?",
    re.ASCII,
)
MAX_VERSION_LENGTH = 128
_VERSION_ALLOWED = (
    "a semantic version MAJOR.MINOR.PATCH (e.g. 1.0.0), optionally with -prerelease "
    f"and/or +build (e.g. 1.2.3-rc.1+build.5), no leading zeros, at most "
    f"{MAX_VERSION_LENGTH} characters, written as a string"
)

MAX_CADENCE_MINUTES = 525_600  # one year: anything longer is a typo, not a schedule
MAX_REF_LENGTH = 255
MAX_EXCLUDE_GLOB_LENGTH = 1024
MAX_TENANTS_FILE_BYTES = 4 * 1024 * 1024
MAX_PROBLEMS_SHOWN = 50

TOP_LEVEL_KEYS = ("tenants",)
TENANT_KEYS = ("id", "repos")
REPO_KEYS = ("slug", "path", "ref", "parser", "cadence_minutes")
PARSER_KEYS = ("id", "version", "exclude", "secret_files")


# The variables a repo 'path' may use: the project's own, from its settings. The
# environment at large is not read, so a file means the same wherever it is loaded with
# the same settings, and a typo is refused instead of expanding to nothing.
PATH_VARIABLES = ("NEO_HOME",)
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


def is_valid_id(value: object) -> bool:
    """True for a tenant id, repo slug or parser id: ``^[a-z0-9][a-z0-9-]{0,62}$``, ASCII."""
    return isinstance(value, str) and _ID_RE.fullmatch(value) is not None


def is_semver(value: object) -> bool:
    """True for MAJOR.MINOR.PATCH with optional -prerelease and +build (semver.org)."""
    return (
        isinstance(value, str)
        and len(value) <= MAX_VERSION_LENGTH
        and _SEMVER_RE.fullmatch(value) is not None
    )


def id_defects(value: str) -> list[str]:
    """Why a string is not an id, in words a person can act on."""
    defects: list[str] = []
    if value == "":
        return ["it is empty"]
    if value != value.strip():
        defects.append("it has leading or trailing whitespace")
    distinct = list(dict.fromkeys(value))
    non_ascii = [char for char in distinct if ord(char) > 127]
    for char in non_ascii[:3]:  # a few named characters say enough
        name = unicodedata.name(char, "unnamed character")
        folded = unicodedata.normalize("NFKC", char)
        lookalike = f", a look-alike of {folded!r}" if folded.isascii() else ""
        defects.append(f"it contains non-ASCII {char!r} (U+{ord(char):04X} {name}{lookalike})")
    if len(non_ascii) > 3:
        defects.append(f"and {len(non_ascii) - 3} more non-ASCII characters")
    for char in distinct:
        if char.isascii() and unicodedata.category(char) == "Cc":
            defects.append(f"it contains the control character {char!r}")
    if any("A" <= char <= "Z" for char in value):
        lowered = value.strip().lower()
        perhaps = f" (perhaps {lowered!r})" if is_valid_id(lowered) else ""
        defects.append(f"it has uppercase letters{perhaps}")
    others = sorted(
        {c for c in value if c.isascii() and c.isprintable() and not re.match(r"[a-zA-Z0-9-]", c)}
    )
    if others:
        defects.append("it contains " + ", ".join(repr(c) for c in others))
    if value.startswith("-"):
        defects.append("it starts with '-'")
    if len(value) > 63:
        defects.append(f"it is {len(value)} characters long (at most 63)")
    return defects or ["it does not match the pattern"]


def ref_defect(ref: str) -> str | None:
    """Why git would refuse ``ref`` as a name (git check-ref-format rules, plus no
    leading '-' so a ref can never be read as a git option)."""
    if ref == "":
        return "it is empty"
    if len(ref) > MAX_REF_LENGTH:
        return f"it is {len(ref)} characters long"
    bad = sorted({c for c in ref if c in " ~^:?*[\\" or unicodedata.category(c) in ("Cc", "Zs")})
    if bad:
        return "it contains " + ", ".join(repr(c) for c in bad)
    if ref.startswith("-"):
        return "it starts with '-' (it would be read as a git option)"
    for rule, broken in (
        ("it contains '..'", ".." in ref),
        ("it contains '@{'", "@{" in ref),
        ("it is '@'", ref == "@"),
        ("it contains '//'", "//" in ref),
        ("it starts with '/'", ref.startswith("/")),
        ("it ends with '/', '.' or '.lock'", ref.endswith(("/", ".", ".lock"))),
        ("a component starts with '.'", any(part.startswith(".") for part in ref.split("/"))),
    ):
        if broken:
            return rule
    return None


def glob_defect(glob: str) -> str | None:
    if glob == "":
        return "it is empty"
    if len(glob) > MAX_EXCLUDE_GLOB_LENGTH:
        return f"it is {len(glob)} characters long"
    if "\x00" in glob:
        return "it contains NUL"
    if glob.startswith(("/", "\\")) or re.match(r"[A-Za-z]:[\\/]", glob):
        return "it is absolute (globs match paths relative to the repo root)"
    if ".." in re.split(r"[\\/]", glob):
        return "it has a '..' segment (globs match paths inside the repo)"
    return None
