"""What counts as a secret: files never read (``DEFAULT_SECRET_FILE_GLOBS``, unless a repo
declares ``parser.secret_files``) and the high-confidence patterns no chunk may carry
(``scan``, rules in ``RULES``; a finding names rule and line, never the text). High
confidence because a matching chunk is never embedded, stored or served. Pure."""

import hashlib
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

# --------------------------------------------------------------------------- files
# Globs in the envelope's exclude syntax (sources/rules/path_rules.py): a pattern with no
# '/' matches a path component at any depth. `.env.*` includes templates
# (`.env.example`): they are often copied with real values, and the code that reads the
# variables already names them for an agent. A repo overrides the list (README).
DEFAULT_SECRET_FILE_GLOBS: tuple[str, ...] = (
    # environment files
    ".env",
    ".env.*",
    ".envrc",
    # private keys and certificates with keys
    "*.env",
    "*.pem",
    "*.key",
    "*.ppk",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    # keystores
    "*.jks",
    "*.keystore",
    "*.p12",
    "*.pfx",
    "*.kdbx",
    # credential files
    ".npmrc",
    ".pypirc",
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".dockercfg",
    "**/.docker/config.json",
    "**/.aws/credentials",
    "credentials.json",
    "client_secret*.json",
    "*.tfstate",
    "*.tfstate.backup",
)


# --------------------------------------------------------------------------- findings
@dataclass(frozen=True)
class Finding:
    """One secret in a text: which rule, on which 1-based line (never the secret)."""

    rule: str
    line: int


# A value that is a placeholder, a template or a reference, never a secret itself.
_PLACEHOLDER_RE = re.compile(
    r"(?i)(?:^|[^a-z])(?:example|sample|placeholder|dummy|changeme|change_me|your|xxx|redacted"
    r"|fake|test|todo|secret|password|passwd|token|insert|replace)(?:[^a-z]|$)"
    r"|\*{3}|x{6}|[<>{}`]|^\$|\$[{(]|%[sd(]|\.\.\."
)


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value`` (0 for an empty string)."""
    if not value:
        return 0.0
    counts: dict[str, int] = {}
    for ch in value:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _classes(value: str) -> int:
    return (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
        + any(not c.isalnum() for c in value)
    )


def looks_random(value: str, *, min_length: int = 8) -> bool:
    """A literal that reads as a generated secret: long enough, no whitespace, mixed
    character classes, high entropy, and not a placeholder or a template."""
    if len(value) < min_length or len(value) > 512 or any(c.isspace() for c in value):
        return False
    if _PLACEHOLDER_RE.search(value):
        return False
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    if not (has_digit and has_alpha):
        return False
    # An identifier with digits (`user_id2`, `v1_beta`) is code, not a secret.
    if re.fullmatch(r"[a-z0-9_.\-/]+", value) and len(value) < 20:
        return False
    if _classes(value) < 3 and len(value) < 20:
        return False
    return shannon_entropy(value) >= 3.0


# A whole value that is only a repetition or a run (`0000...`, `abcdef...`) is a filler.
def _filler(value: str) -> bool:
    return len(set(value)) <= 4


@dataclass(frozen=True)
class Rule:
    """One pattern. ``hints``: lowercase substrings one of which every match contains (a
    text without any is not searched: most chunks cost a few substring tests); ``regex``
    finds a candidate, starting with a literal where it can (Python's regex engine then
    skips ahead by substring search); ``accept`` confirms it from the match."""

    name: str
    hints: tuple[str, ...]
    regex: re.Pattern[str]
    accept: Callable[[str, re.Match[str]], bool]
    in_prose: bool = True  # also applied to prose documentation (PROSE_SUFFIXES)


def _bounded(value: str, match: re.Match[str]) -> bool:
    """A token that is not the tail of a longer word and not a filler."""
    start = match.start("value")
    before = match.string[start - 1] if start > 0 else " "
    return not (before.isalnum() or before in "_-") and not _filler(value)


def _token(name: str, prefix: str, body: str) -> Rule:
    """A token of a known service: a literal prefix, its alphabet and length."""
    return Rule(
        name,
        (prefix.lower(),),
        re.compile("(?P<value>" + re.escape(prefix) + body + ")(?![A-Za-z0-9])"),
        _bounded,
    )


# The names an assignment of a secret uses: the identifier ends in one of these words.
_SECRET_NAME_RE = re.compile(
    r"(?i)(?:[A-Za-z0-9_.\-]*[_.\-])?"
    r"(?:secret|secret_?key|token|auth_?token|access_?token|api_?token|refresh_?token"
    r"|passw(?:or)?d|pwd|pass_?phrase|api_?key|apikey|access_?key|private_?key"
    r"|client_?secret|signing_?key|encryption_?key|master_?key|credentials?)"
)
# KEYWORD = "value" / KEYWORD: 'value' / "KEYWORD": "value" / KEYWORD=value (env, yaml,
# ini, toml). The keyword is found first (cheap), the whole name is checked after.
_ASSIGNMENT_RE = re.compile(
    r"(?i)(?P<kw>key|secret|token|pwd|passw(?:or)?d|phrase|credentials?)[\"']?"
    r"[ \t]*(?::=|=>|=|:)[ \t]*"
    r"(?:[bru]{0,2}\"(?P<dq>[^\"\\\n]{8,512})\"|[bru]{0,2}'(?P<sq>[^'\\\n]{8,512})'"
    r"|(?P<bare>[^\s\"'#,;()\[\]{}]{8,512})(?=[ \t]*(?:#.*)?$))",
    re.MULTILINE,
)


def _assignment(value: str, match: re.Match[str]) -> bool:
    """The whole name (the identifier the keyword ends) says secret, and the value is a
    literal that looks random."""
    text = match.string
    start = end = match.start("kw")
    while (
        start > 0 and end - start < 128 and (text[start - 1].isalnum() or text[start - 1] in "_.-")
    ):
        start -= 1
    name = text[start:end] + match["kw"]
    return bool(_SECRET_NAME_RE.fullmatch(name)) and looks_random(value)


_PRIVATE_KEY_RE = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----"
    # the body follows (a real key, not a parser naming the header): within a few
    # header lines or escapes, a run of base64
    r"(?:[\s\S]{0,300}?)[A-Za-z0-9+/=]{40,}"
)

_URL_CREDENTIALS_RE = re.compile(
    r"://(?P<user>[^\s:/@'\"]{1,128}):(?P<value>[^\s@/'\"]{1,256})@[A-Za-z0-9.\-\[\]]+"
)


def _aws_key_id(value: str, match: re.Match[str]) -> bool:
    # AWS's own documentation key ids end in EXAMPLE (AKIAIOSFODNN7EXAMPLE).
    return _bounded(value, match) and not value.endswith("EXAMPLE") and not _filler(value[4:])


def _random(min_length: int) -> Callable[[str, re.Match[str]], bool]:
    return lambda value, match: looks_random(value, min_length=min_length)


def _any(value: str, match: re.Match[str]) -> bool:
    return True


RULES: tuple[Rule, ...] = (
    Rule("private-key-block", ("private key",), _PRIVATE_KEY_RE, _any),
    Rule(
        "aws-access-key-id",
        ("akia", "asia", "abia", "acca"),
        re.compile(r"(?P<value>(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16})(?![A-Z0-9])"),
        _aws_key_id,
    ),
    Rule(
        "aws-secret-access-key",
        ("aws",),
        re.compile(
            r"(?i)aws_?secret_?(?:access_?)?key[\"']?[ \t]*(?::=|=>|=|:)[ \t]*[\"']?"
            r"(?P<value>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
        ),
        _random(40),
    ),
    _token("google-api-key", "AIza", r"[0-9A-Za-z_\-]{35}"),
    _token("google-oauth-client-secret", "GOCSPX-", r"[A-Za-z0-9_\-]{28}"),
    Rule(
        "azure-storage-account-key",
        ("accountkey=",),
        re.compile(r"(?i)AccountKey=(?P<value>[A-Za-z0-9+/]{86}==)"),
        _random(40),
    ),
    Rule(
        "azure-shared-access-key",
        ("sharedaccesskey=",),
        re.compile(r"(?i)SharedAccessKey=(?P<value>[A-Za-z0-9+/]{42,43}=)"),
        _random(40),
    ),
    _token("github-token", "gh", r"[pousr]_[A-Za-z0-9]{36,251}"),
    _token("github-fine-grained-token", "github_pat_", r"[A-Za-z0-9]{22}_[A-Za-z0-9]{59}"),
    _token("gitlab-token", "glpat-", r"[A-Za-z0-9_\-]{20,}"),
    _token("slack-token", "xox", r"[abposr]-[0-9]{6,}-[A-Za-z0-9\-]{10,}"),
    _token(
        "slack-webhook",
        "https://hooks.slack.com/services/",
        r"T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{20,}",
    ),
    Rule(
        "stripe-live-key",
        ("_live_",),
        re.compile(r"(?P<value>[sr]k_live_[0-9A-Za-z]{20,247})(?![A-Za-z0-9])"),
        _bounded,
    ),
    _token(
        "openai-key",
        "sk-",
        r"(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}T3BlbkFJ[A-Za-z0-9_\-]{20,}",
    ),
    _token("openai-project-key", "sk-", r"(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{80,}"),
    _token("anthropic-key", "sk-ant-", r"(?:api|admin)[0-9]{2}-[A-Za-z0-9_\-]{80,}"),
    _token("npm-token", "npm_", r"[A-Za-z0-9]{36}"),
    _token("pypi-token", "pypi-AgE", r"[A-Za-z0-9_\-]{50,}"),
    _token("huggingface-token", "hf_", r"[A-Za-z0-9]{34,40}"),
    _token("sendgrid-key", "SG.", r"[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}"),
    _token("digitalocean-token", "do", r"[opr]_v1_[a-f0-9]{64}"),
    _token("shopify-token", "shp", r"(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    Rule(
        "telegram-bot-token",
        (":aa",),
        re.compile(r"(?<![0-9])(?P<value>[0-9]{8,10}:AA[A-Za-z0-9_\-]{33})(?![A-Za-z0-9_\-])"),
        _bounded,
    ),
    Rule("url-credentials", ("://",), _URL_CREDENTIALS_RE, _random(8)),
    Rule(
        "secret-assignment",
        ("key", "secret", "token", "pwd", "passw", "phrase", "credential"),
        _ASSIGNMENT_RE,
        _assignment,
        # Prose documentation shows how to set a secret with an example value (flask's
        # docs/config.rst: SECRET_KEY = '192b9bdd...'); a real token pasted in a README
        # still meets every format rule above.
        in_prose=False,
    ),
)

# Documentation written as prose, by file name suffix (lowercase).
PROSE_SUFFIXES = (".md", ".markdown", ".rst", ".txt", ".adoc", ".asciidoc")


# One digest of the table: the fence receipt carries it, so a reader knows which rules
# decided.
RULES_DIGEST = hashlib.sha256(
    repr(
        (
            DEFAULT_SECRET_FILE_GLOBS,
            [(r.name, r.hints, r.regex.pattern, r.in_prose) for r in RULES],
            PROSE_SUFFIXES,
            _PLACEHOLDER_RE.pattern,
            _SECRET_NAME_RE.pattern,
        )
    ).encode()
).hexdigest()[:16]


def _value_of(match: re.Match[str]) -> str:
    groups = match.groupdict()
    for name in ("value", "dq", "sq", "bare"):
        if groups.get(name) is not None:
            return groups[name]
    return match.group(0)


def _line_at(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def is_prose(path: str | None) -> bool:
    return path is not None and path.lower().endswith(PROSE_SUFFIXES)


def iter_findings(text: str, path: str | None = None) -> Iterator[Finding]:
    """Every secret in ``text`` (the content of ``path``, when known: prose documentation
    skips the assignment rule), in rule order then position."""
    if not text:
        return
    lower = text.lower()
    prose = is_prose(path)
    for rule in RULES:
        if prose and not rule.in_prose:
            continue
        if not any(hint in lower for hint in rule.hints):
            continue
        for match in rule.regex.finditer(text):
            if rule.accept(_value_of(match), match):
                yield Finding(rule.name, _line_at(text, match.start()))


def scan(text: str, path: str | None = None) -> list[Finding]:
    """The secrets in ``text`` (of ``path``), one per (rule, line), by line then rule."""
    found = {(f.line, f.rule): f for f in iter_findings(text, path)}
    return [found[key] for key in sorted(found)]


def has_secret(text: str, path: str | None = None) -> bool:
    """True when ``text`` (of ``path``) holds at least one secret (stops at the first)."""
    return next(iter_findings(text, path), None) is not None


# --------------------------------------------------------------------------- receipts
MAX_RECEIPT_FINDINGS = 16
MAX_LOCATIONS = 32


def fence_receipt(
    findings: list[Finding], source_path: str, start_line: int | None, end_line: int | None
) -> dict[str, object]:
    """What a ``secret`` fence records: where (the file's own 1-based lines when the chunk
    knows its first line, else the chunk's) and which rules; never the secret."""
    offset = (start_line - 1) if start_line is not None else 0
    return {
        "sourcePath": source_path,
        "startLine": start_line,
        "endLine": end_line,
        "findings": [
            {"rule": f.rule, "line": f.line + offset} for f in findings[:MAX_RECEIPT_FINDINGS]
        ],
        "findingCount": len(findings),
        "rulesDigest": RULES_DIGEST,
    }


def secret_locations(
    receipts: list[tuple[str, object]], cap: int = MAX_LOCATIONS
) -> list[dict[str, object]]:
    """``[{"chunkId", "path", "line", "rule"}]`` from ``(chunk id, receipt)`` pairs: one
    entry per finding, sorted by path and line, at most ``cap``. A receipt that is not a
    mapping of the shape ``fence_receipt`` writes is left out (never guessed)."""
    out: list[dict[str, object]] = []
    for chunk_id, receipt in receipts:
        if not isinstance(receipt, dict) or not isinstance(receipt.get("sourcePath"), str):
            continue
        for finding in receipt.get("findings") or []:
            if isinstance(finding, dict) and isinstance(finding.get("line"), int):
                out.append(
                    {
                        "chunkId": chunk_id,
                        "path": receipt["sourcePath"],
                        "line": finding["line"],
                        "rule": str(finding.get("rule")),
                    }
                )
    out.sort(key=lambda e: (str(e["path"]), int(e["line"]), str(e["rule"]), str(e["chunkId"])))  # type: ignore[call-overload]
    return out[:cap]


# --------------------------------------------------------------------------- redaction
REDACTED = "[redacted: this line holds a secret ({rule})]"
_KEY_END_RE = re.compile(r"-----END (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----")


def secret_lines(text: str, path: str | None = None) -> dict[int, str]:
    """The 1-based lines of ``text`` (of ``path``) that hold a secret, each with its rule:
    a finding's own line, and for a private key the whole block to its END line (or to
    the end of the text when none follows)."""
    lines: dict[int, str] = {}
    for finding in scan(text, path):
        lines.setdefault(finding.line, finding.rule)
        if finding.rule != "private-key-block":
            continue
        begin = sum(len(x) + 1 for x in text.split("\n")[: finding.line - 1])
        end = _KEY_END_RE.search(text, begin)
        last = _line_at(text, end.start()) if end else text.count("\n") + 1
        for n in range(finding.line, last + 1):
            lines.setdefault(n, finding.rule)
    return lines


def redact(text: str, path: str | None = None) -> tuple[str, dict[int, str]]:
    """``text`` with each line that holds a secret replaced by a ``REDACTED`` line, and
    those lines: what a file read or a grep may show of a file at the indexed revision."""
    found = secret_lines(text, path)
    if not found:
        return text, found
    out = [
        REDACTED.format(rule=found[n]) if n in found else line
        for n, line in enumerate(text.split("\n"), 1)
    ]
    return "\n".join(out), found
