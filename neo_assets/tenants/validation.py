"""tenants.yaml: the schema of what tenants declare, and its validation.

``load_tenants(path)`` reads the file and either returns a fully valid ``TenantsFile`` or
raises one ``TenantsConfigError`` listing EVERY problem found, before anything runs.
``read_tenants(path)`` never refuses: it returns every problem attributed to its tenant
block or repo entry (a YAML error inside one tenant's block included), from which
``declaration/in_force.py`` builds the declaration in force (declaration/rules.py: a
misdeclared entry keeps its last good declaration; the others load).
Each problem names the place (a tenant or repo by its id/slug, by index when the id
itself is bad, e.g. ``tenants[1].repos[0].slug``), the field, what was found and what
is allowed; the error's message names the file and, where known, the line.

Plain frozen dataclasses + hand validation rather than pydantic: the messages are the
product here, and hand validation lets each one say exactly what is allowed.
"""

import datetime
import difflib
import os
import re
import reprlib
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from neo_assets.config.settings import SettingsError, load_settings
from neo_assets.core.codes import CONFIG_INVALID
from neo_assets.core.ids.config_digest import declaration_digest, repo_declaration_digest
from neo_assets.declaration.rules import SOURCE_FILE, Misdeclared, TenantBlock
from neo_assets.secrets.rules import DEFAULT_SECRET_FILE_GLOBS
from neo_assets.sources.rules.parser_versions import (
    NEO_CODE,
    unknown_parser_problem,
    unsupported_version_problem,
)
from neo_assets.tenants.rules import (  # noqa: F401  (re-exported: callers import them here)
    _ID_ALLOWED,
    _ID_RE,
    _NAME_RE,
    _SEMVER_RE,
    _VERSION_ALLOWED,
    ID_PATTERN,
    MAX_CADENCE_MINUTES,
    MAX_EXCLUDE_GLOB_LENGTH,
    MAX_PROBLEMS_SHOWN,
    MAX_REF_LENGTH,
    MAX_TENANTS_FILE_BYTES,
    MAX_VERSION_LENGTH,
    PARSER_KEYS,
    PATH_VARIABLES,
    REPO_KEYS,
    TENANT_KEYS,
    TOP_LEVEL_KEYS,
    glob_defect,
    id_defects,
    is_semver,
    is_valid_id,
    ref_defect,
)

_HOW_TO_CREATE = (
    "create it (copy examples/tenants.yaml and edit it), or set NEO_TENANTS_FILE to the "
    "path of an existing tenants file"
)


# --------------------------------------------------------------------------- schema


@dataclass(frozen=True, slots=True)
class ParserDecl:
    """The parser a repo is read with: its identity goes into every chunk id."""

    id: str
    version: str
    exclude: tuple[str, ...] = ()
    # The globs of files that hold secrets, never read (None: the defaults,
    # secrets/rules.DEFAULT_SECRET_FILE_GLOBS; [] reads them, the chunk scan still applies).
    secret_files: tuple[str, ...] | None = None

    @property
    def effective_exclude(self) -> tuple[str, ...]:
        """What the envelope does not yield: the declared globs and the secret files."""
        secret = DEFAULT_SECRET_FILE_GLOBS if self.secret_files is None else self.secret_files
        return (*self.exclude, *secret)

    def to_plain(self) -> dict[str, Any]:
        # Exclude globs are a set: their order and repetition change nothing, so they do
        # not change the declaration either.
        plain: dict[str, Any] = {
            "id": self.id,
            "version": self.version,
            "exclude": sorted(set(self.exclude)),
        }
        if self.secret_files is not None:  # absent: the digest of older declarations holds
            plain["secret_files"] = sorted(set(self.secret_files))
        return plain


@dataclass(frozen=True, slots=True)
class RepoDecl:
    """One declared repository: ``path`` is absolute and resolved (symlinks followed)."""

    slug: str
    path: Path
    ref: str | None
    parser: ParserDecl
    cadence_minutes: int | None = None

    def to_plain(self) -> dict[str, Any]:
        return {
            "slug": self.slug,
            "path": str(self.path),
            "ref": self.ref,
            "parser": self.parser.to_plain(),
            "cadence_minutes": self.cadence_minutes,
        }

    def declaration_digest(self) -> str:
        return repo_declaration_digest(self.to_plain())

    @classmethod
    def from_plain(cls, plain: Mapping[str, Any]) -> "RepoDecl":
        """The inverse of ``to_plain`` (a last good declaration read back)."""
        parser = plain["parser"]
        cadence = plain.get("cadence_minutes")
        return cls(
            slug=str(plain["slug"]),
            path=Path(plain["path"]),
            ref=plain.get("ref"),
            parser=ParserDecl(
                id=str(parser["id"]),
                version=str(parser["version"]),
                exclude=tuple(parser.get("exclude") or ()),
                secret_files=None
                if parser.get("secret_files") is None
                else tuple(parser["secret_files"]),
            ),
            cadence_minutes=None if cadence is None else int(cadence),
        )


@dataclass(frozen=True, slots=True)
class Tenant:
    id: str
    repos: tuple[RepoDecl, ...]

    def to_plain(self) -> dict[str, Any]:
        # Repo order in the file is not meaningful; slugs are unique, so sort by them.
        repos = sorted(self.repos, key=lambda repo: repo.slug)
        return {"id": self.id, "repos": [repo.to_plain() for repo in repos]}

    def declaration_digest(self) -> str:
        return declaration_digest(self.to_plain())

    def repo(self, slug: str) -> RepoDecl | None:
        return next((repo for repo in self.repos if repo.slug == slug), None)

    @classmethod
    def from_plain(cls, plain: Mapping[str, Any]) -> "Tenant":
        return cls(
            id=str(plain["id"]),
            repos=tuple(RepoDecl.from_plain(repo) for repo in plain.get("repos", ())),
        )


@dataclass(frozen=True, slots=True)
class TenantsFile:
    """A validated tenants file; ``path`` is the file's absolute path.

    Loaded through ``services/declaration.load_declaration``, it is the declaration in
    force (declaration/rules.py): ``tenants`` may hold last good declarations standing in
    for misdeclared ones; ``misdeclared`` lists what the file gets wrong, ``withheld`` the
    (tenant, repo or None) names declared but unusable (never swept, served or retired),
    ``source`` is ``file`` or ``last-good`` (the file could not be read at all) and
    ``file_problems`` what is wrong with the file as a whole; ``retires_nothing``: part of
    the file names no tenant, so no tenant or repo may be judged retired."""

    path: Path
    tenants: tuple[Tenant, ...]
    misdeclared: tuple[Misdeclared, ...] = ()
    withheld: tuple[tuple[str, str | None], ...] = ()
    source: str = SOURCE_FILE
    file_problems: tuple["ConfigProblem", ...] = ()
    retires_nothing: bool = False

    def tenant(self, tenant_id: str) -> Tenant | None:
        return next((tenant for tenant in self.tenants if tenant.id == tenant_id), None)

    def iter_repos(self) -> Iterator[tuple[Tenant, RepoDecl]]:
        """Every (tenant, repo) pair in file order."""
        for tenant in self.tenants:
            for repo in tenant.repos:
                yield tenant, repo


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One thing wrong with the file: where (``location``, e.g.
    ``tenants['acme'].repos[0].slug``; ``(file)`` for the file as a whole), what, and the
    1-based line when known."""

    location: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = self.location if self.line is None else f"{self.location} (line {self.line})"
        return f"{where}: {self.message}"


class TenantsConfigError(Exception):
    """The tenants file is not usable; ``problems`` lists every reason at once."""

    code = CONFIG_INVALID

    def __init__(self, path: Path, problems: Sequence[ConfigProblem]) -> None:
        self.path = path
        self.problems = list(problems)
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        lines = [f"invalid tenants file {path} ({count} {noun}; nothing was run):"]
        lines += [f"  - {problem}" for problem in self.problems[:MAX_PROBLEMS_SHOWN]]
        if count > MAX_PROBLEMS_SHOWN:
            lines.append(f"  ... and {count - MAX_PROBLEMS_SHOWN} more")
        super().__init__("\n".join(lines))


# --------------------------------------------------------------------------- predicates


def is_git_work_tree(path: Path) -> bool:
    """True when ``path`` is the top of a git work tree (has a ``.git`` directory, or a
    ``.git`` file as in linked worktrees and submodules); a plain directory otherwise."""
    return (path / ".git").exists()


def _reference(name: str) -> str:
    """``${NAME}`` as a message shows it: bare when it is a plain name, else quoted."""
    if re.fullmatch(r"[A-Za-z0-9_]{1,64}", name, re.ASCII):
        return "${" + name + "}"
    return _short_repr("${" + name + "}")


def _unknown_variable_hint(name: str) -> str:
    if name == "HOME":
        return " (write '~' for your home directory)"
    close = difflib.get_close_matches(name.upper(), PATH_VARIABLES, n=1, cutoff=0.6)
    return f" (did you mean ${{{close[0]}}}?)" if close else ""


class PathVariableError(ValueError):
    """A repo path's ``$`` references cannot be expanded; the message says why."""


def expand_path_variables(text: str, value_of: Callable[[str], str]) -> str:
    """``text`` with each ``${NAME}`` (NAME in PATH_VARIABLES) replaced by
    ``value_of(NAME)`` and each ``$$`` by a literal ``$``; ``value_of`` is called only
    for the names used. Raises PathVariableError listing every defect: an unknown or
    empty name, an unclosed ``${``, a ``$`` that starts neither."""
    out: list[str] = []
    defects: list[str] = []
    index = 0
    while (dollar := text.find("$", index)) >= 0:
        out.append(text[index:dollar])
        following = text[dollar + 1 : dollar + 2]
        if following == "$":
            out.append("$")
            index = dollar + 2
        elif following == "{":
            close = text.find("}", dollar + 2)
            if close < 0:
                defects.append(
                    f"has an unclosed variable reference {_short_repr(text[dollar:])} "
                    "(no closing '}')"
                )
                index = len(text)
                break
            name = text[dollar + 2 : close]
            index = close + 1
            if name in PATH_VARIABLES:
                out.append(value_of(name))
            elif name == "":
                defects.append("has an empty variable reference ${}")
            else:
                defects.append(
                    f"uses the unknown variable {_reference(name)}{_unknown_variable_hint(name)}"
                )
        else:
            word = _NAME_RE.match(text, dollar + 1)
            name = word.group() if word else ""
            if name in PATH_VARIABLES:
                instead = f"write ${{{name}}}, or '$$' for a literal '$'"
            elif name == "HOME":
                instead = "write '~' for your home directory, or '$$' for a literal '$'"
            else:
                instead = "write '$$' for a literal '$'"
            defects.append(
                f"has a '$' that starts no variable reference, {_short_repr('$' + name)} "
                f"({instead})"
            )
            index = dollar + 1
    out.append(text[index:])
    if defects:
        raise PathVariableError("; ".join(defects))
    return "".join(out)


# --------------------------------------------------------------------------- YAML


class _MarkedDict(dict[Any, Any]):
    """A YAML mapping that remembers the line of each key, for messages."""

    line: int | None = None
    key_lines: dict[Any, int]


class _MarkedList(list[Any]):
    line: int | None = None
    item_lines: list[int]


class _ShortRepr(reprlib.Repr):
    """Bounded repr: a hostile value (alias bombs, huge strings) prints in a few dozen
    characters, never by walking its whole structure."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = 70
        self.maxother = 70
        self.maxlist = 4
        self.maxdict = 4
        self.maxtuple = 4
        self.maxset = 4
        self.maxlevel = 2

    def repr__MarkedDict(self, value: dict[Any, Any], level: int) -> str:
        return self.repr_dict(value, level)

    def repr__MarkedList(self, value: list[Any], level: int) -> str:
        return self.repr_list(value, level)


_short_repr = _ShortRepr().repr

_YamlLoaderBase: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_YamlLoaderBase):  # type: ignore[misc]
    """Safe loading, plus: duplicate keys are an error (YAML would silently keep the
    last one), and mappings/sequences carry their line numbers."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(
                key_node, yaml.ScalarNode
            ):
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in first_seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {_short_repr(key)} (first at line {first_seen[key]})",
                    key_node.start_mark,
                )
            first_seen[key] = line
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


def _construct_marked_map(
    loader: _StrictLoader, node: yaml.MappingNode
) -> Iterator[dict[Any, Any]]:
    data = _MarkedDict()
    data.line = node.start_mark.line + 1
    data.key_lines = {}
    yield data
    data.update(loader.construct_mapping(node))
    # node.value is flattened (merge keys expanded) by now; later keys win, as in dict.
    for key_node, _ in node.value:
        try:
            data.key_lines[loader.construct_object(key_node)] = key_node.start_mark.line + 1
        except TypeError:
            continue


def _construct_marked_seq(loader: _StrictLoader, node: yaml.SequenceNode) -> Iterator[list[Any]]:
    data = _MarkedList()
    data.line = node.start_mark.line + 1
    data.item_lines = [item.start_mark.line + 1 for item in node.value]
    yield data
    data.extend(loader.construct_sequence(node))


_StrictLoader.add_constructor("tag:yaml.org,2002:map", _construct_marked_map)
_StrictLoader.add_constructor("tag:yaml.org,2002:seq", _construct_marked_seq)


def _key_line(mapping: object, key: object) -> int | None:
    lines = getattr(mapping, "key_lines", None)
    if lines is not None:
        try:
            if key in lines:
                return int(lines[key])
        except TypeError:
            pass
    return getattr(mapping, "line", None)


def _item_line(sequence: object, index: int) -> int | None:
    lines = getattr(sequence, "item_lines", None)
    if lines is not None and index < len(lines):
        return int(lines[index])
    return getattr(sequence, "line", None)


# --------------------------------------------------------------------------- messages


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, list | tuple):
        return "list"
    return type(value).__name__


def _string_hint(value: object) -> str:
    """Why YAML produced a non-string where text was meant, and the fix."""
    if isinstance(value, bool):
        return " (YAML reads unquoted yes/no/on/off/true/false as booleans: put it in quotes)"
    if isinstance(value, int | float | datetime.date):
        return " (YAML reads an unquoted number or date as a non-string: put it in quotes)"
    return ""


def _found(value: object) -> str:
    return f"{_short_repr(value)} ({_type_name(value)})"


def _key_label(key: object) -> str:
    if isinstance(key, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,40}", key, re.ASCII):
        return key
    return _short_repr(key)


# --------------------------------------------------------------------------- validation


@dataclass(slots=True)
class _Validator:
    base_dir: Path
    allowed_roots: tuple[Path, ...] | None
    check_paths: bool
    problems: list[ConfigProblem]
    # ${NEO_HOME}'s value; None: read from the settings when a path first uses it.
    home: Path | None = None
    # What each tenant block of the file says, problems attributed (``read_tenants``).
    blocks: list[TenantBlock] = field(default_factory=list)

    def neo_home(self) -> Path:
        if self.home is None:
            self.home = load_settings().store.home_dir
        return self.home

    def add(self, location: str, message: str, line: int | None) -> None:
        self.problems.append(ConfigProblem(location, message, line))

    # -- generic field checks

    def keys(
        self,
        mapping: dict[Any, Any],
        location: str,
        allowed: tuple[str, ...],
        required: tuple[str, ...],
        what: str,
    ) -> None:
        allowed_text = ", ".join(allowed)
        for key in mapping:
            if key in allowed:
                continue
            hint = ""
            if isinstance(key, str):
                close = difflib.get_close_matches(key.strip().lower(), allowed, n=1, cutoff=0.6)
                if close:
                    hint = f"; did you mean {close[0]!r}?"
            self.add(
                f"{location}.{_key_label(key)}" if location else _key_label(key),
                f"unknown key in {what}; found key {_found(key)}; allowed keys: {allowed_text}"
                + hint,
                _key_line(mapping, key),
            )
        for key in required:
            if mapping.get(key) is None:
                found = f"no {key!r} key" if key not in mapping else "an empty value (null)"
                self.add(
                    f"{location}.{key}" if location else key,
                    f"missing required key {key!r} in {what}; found {found}; "
                    f"allowed keys: {allowed_text}",
                    _key_line(mapping, key),
                )

    def string(
        self, value: object, location: str, line: int | None, what: str, allowed: str
    ) -> str | None:
        if isinstance(value, str):
            return value
        self.add(
            location,
            f"{what} must be a string; found {_found(value)}{_string_hint(value)}; "
            f"allowed: {allowed}",
            line,
        )
        return None

    def ident(self, value: object, location: str, line: int | None, what: str) -> str | None:
        text = self.string(value, location, line, what, _ID_ALLOWED)
        if text is None:
            return None
        if is_valid_id(text):
            return text
        defects = "; ".join(id_defects(text))
        self.add(
            location,
            f"invalid {what}: {defects}; found {_found(text)}; allowed: {_ID_ALLOWED}",
            line,
        )
        return None

    # -- the schema

    def top(self, data: object) -> tuple[Tenant, ...]:
        if data is None:
            self.add(
                "(file)",
                "the file is empty (or only comments); found no YAML document; allowed: a "
                "mapping with a 'tenants' list, e.g. 'tenants: [{id: acme, repos: [...]}]'",
                None,
            )
            return ()
        if not isinstance(data, dict):
            hint = (
                " (put the list under a top-level 'tenants:' key)" if isinstance(data, list) else ""
            )
            self.add(
                "(file)",
                f"the top level must be a mapping; found {_found(data)}{hint}; allowed: a "
                "mapping with exactly one key, 'tenants'",
                getattr(data, "line", 1),
            )
            return ()
        self.keys(data, "", TOP_LEVEL_KEYS, ("tenants",), "the top level")
        raw_tenants = data.get("tenants")
        if raw_tenants is None:
            return ()
        line = _key_line(data, "tenants")
        if not isinstance(raw_tenants, list):
            hint = (
                " (write each tenant as a list item: '- id: acme')"
                if isinstance(raw_tenants, dict)
                else ""
            )
            self.add(
                "tenants",
                f"'tenants' must be a list of tenants; found {_found(raw_tenants)}{hint}; "
                "allowed: a non-empty list of mappings with keys id, repos",
                line,
            )
            return ()
        if not raw_tenants:
            self.add(
                "tenants",
                "'tenants' is empty; found []; allowed: a non-empty list of tenants "
                "(each a mapping with keys id, repos)",
                line,
            )
            return ()
        seen: dict[str, int] = {}
        built = [
            self.tenant(raw, index, _item_line(raw_tenants, index), seen)
            for index, raw in enumerate(raw_tenants)
        ]
        return tuple(tenant for tenant in built if tenant is not None)

    def blocks_apart(self, split: "list[_SplitBlock]") -> tuple[Tenant, ...]:
        """``top`` for a file that is valid YAML only item by item: each block that
        parses is validated as usual; one that does not is its tenant's YAML problem."""
        seen: dict[str, int] = {}
        built: list[Tenant | None] = []
        for block in split:
            if block.parsed:
                built.append(self.tenant(block.item, block.index, block.line, seen))
                continue
            problem = block.problem or ConfigProblem(
                f"tenants[{block.index}]", "invalid YAML; allowed: valid YAML", block.line
            )
            named = block.named if block.named is not None and block.named not in seen else None
            if named is not None:
                seen[named] = block.index
                problem = ConfigProblem(f"tenants[{named!r}]", problem.message, problem.line)
            self.problems.append(problem)
            self.blocks.append(TenantBlock(named, (problem,)))
        return tuple(tenant for tenant in built if tenant is not None)

    def tenant(
        self, raw: object, index: int, line: int | None, seen: dict[str, int]
    ) -> Tenant | None:
        location = f"tenants[{index}]"
        start = len(self.problems)
        if not isinstance(raw, dict):
            self.add(
                location,
                f"each tenant must be a mapping; found {_found(raw)}; allowed: a mapping "
                f"with keys {', '.join(TENANT_KEYS)}",
                line,
            )
            self.blocks.append(TenantBlock(None, tuple(self.problems[start:])))
            return None
        raw_id = raw.get("id")
        named = raw_id if is_valid_id(raw_id) and raw_id not in seen else None
        repo_problems: dict[str, tuple[ConfigProblem, ...]] = {}
        unnamed_repo_problems: list[ConfigProblem] = []
        in_repos: set[int] = set()  # the problems attributed to a repo entry
        tenant_id: str | None = None
        if raw.get("id") is not None:
            tenant_id = self.ident(raw["id"], f"{location}.id", _key_line(raw, "id"), "tenant id")
        if tenant_id is not None and tenant_id in seen:
            self.add(
                f"{location}.id",
                f"duplicate tenant id; found {tenant_id!r}, already declared at "
                f"tenants[{seen[tenant_id]}]; allowed: each tenant id once in the file",
                _key_line(raw, "id"),
            )
            tenant_id = None
        elif tenant_id is not None:
            seen[tenant_id] = index
            location = f"tenants[{tenant_id!r}]"
        valid = tenant_id is not None
        self.keys(raw, location, TENANT_KEYS, ("id", "repos"), "a tenant")
        raw_repos = raw.get("repos")
        repos: list[RepoDecl] = []
        if raw_repos is not None and not isinstance(raw_repos, list):
            hint = (
                " (write each repo as a list item: '- slug: widgets')"
                if isinstance(raw_repos, dict)
                else ""
            )
            self.add(
                f"{location}.repos",
                f"'repos' must be a list of repos; found {_found(raw_repos)}{hint}; allowed: "
                f"a list of mappings with keys {', '.join(REPO_KEYS)} (may be empty)",
                _key_line(raw, "repos"),
            )
            valid = False
        elif raw_repos is not None:
            seen_slugs: dict[str, int] = {}
            for repo_index, raw_repo in enumerate(raw_repos):
                raw_slug = raw_repo.get("slug") if isinstance(raw_repo, dict) else None
                slug = raw_slug if is_valid_id(raw_slug) and raw_slug not in seen_slugs else None
                before = len(self.problems)
                repo = self.repo(
                    raw_repo, location, repo_index, _item_line(raw_repos, repo_index), seen_slugs
                )
                found = self.problems[before:]
                in_repos.update(id(problem) for problem in found)
                if found and slug is not None:
                    repo_problems[slug] = tuple(found)
                else:
                    unnamed_repo_problems += found
                if repo is None:
                    valid = False
                else:
                    repos.append(repo)
        else:
            valid = False
        tenant_problems = tuple(p for p in self.problems[start:] if id(p) not in in_repos)
        if (
            named is not None
            and not valid
            and not (tenant_problems or repo_problems or unnamed_repo_problems)
        ):
            # Unusable for a reason no message names (cannot happen today): the tenant's.
            tenant_problems = (ConfigProblem(location, "the tenant cannot be used", line),)
        self.blocks.append(
            TenantBlock(
                named,
                tenant_problems,
                {repo.slug: repo.to_plain() for repo in repos},
                repo_problems,
                tuple(unnamed_repo_problems),
            )
            if named is not None
            else TenantBlock(None, tenant_problems + tuple(unnamed_repo_problems))
        )
        if not valid or tenant_id is None:
            return None
        return Tenant(id=tenant_id, repos=tuple(repos))

    def repo(
        self,
        raw: object,
        tenant_location: str,
        index: int,
        line: int | None,
        seen: dict[str, int],
    ) -> RepoDecl | None:
        location = f"{tenant_location}.repos[{index}]"
        if not isinstance(raw, dict):
            self.add(
                location,
                f"each repo must be a mapping; found {_found(raw)}; allowed: a mapping with "
                f"keys {', '.join(REPO_KEYS)}",
                line,
            )
            return None
        before = len(self.problems)
        slug: str | None = None
        if raw.get("slug") is not None:
            slug = self.ident(raw["slug"], f"{location}.slug", _key_line(raw, "slug"), "repo slug")
        if slug is not None and slug in seen:
            self.add(
                f"{location}.slug",
                f"duplicate repo slug in this tenant; found {slug!r}, already declared at "
                f"{tenant_location}.repos[{seen[slug]}]; allowed: each slug once per tenant",
                _key_line(raw, "slug"),
            )
            slug = None
        elif slug is not None:
            seen[slug] = index
            location = f"{tenant_location}.repos[{slug!r}]"
        self.keys(raw, location, REPO_KEYS, ("slug", "path", "parser"), "a repo")

        path: Path | None = None
        if raw.get("path") is not None:
            path = self.path(raw["path"], f"{location}.path", _key_line(raw, "path"))
        ref: str | None = None
        if raw.get("ref") is not None:
            ref = self.ref(raw["ref"], f"{location}.ref", _key_line(raw, "ref"))
            if (
                ref is not None
                and path is not None
                and self.check_paths
                and not is_git_work_tree(path)
            ):
                self.add(
                    f"{location}.ref",
                    f"'ref' is only for git repositories, but {str(path)!r} is a plain "
                    f"directory (no .git); found ref {ref!r}; allowed: omit 'ref' for a plain "
                    "directory, or point 'path' at the top of a git work tree",
                    _key_line(raw, "ref"),
                )
        parser: ParserDecl | None = None
        if raw.get("parser") is not None:
            parser = self.parser(raw["parser"], f"{location}.parser", _key_line(raw, "parser"))
        cadence: int | None = None
        if raw.get("cadence_minutes") is not None:
            cadence = self.cadence(
                raw["cadence_minutes"],
                f"{location}.cadence_minutes",
                _key_line(raw, "cadence_minutes"),
            )
        if len(self.problems) != before or slug is None or path is None or parser is None:
            return None
        return RepoDecl(slug=slug, path=path, ref=ref, parser=parser, cadence_minutes=cadence)

    def path(self, value: object, location: str, line: int | None) -> Path | None:
        allowed = (
            "a directory path (absolute, '~/...', '${NEO_HOME}/...', or relative to the "
            "tenants file's folder)"
        )
        text = self.string(value, location, line, "'path'", allowed)
        if text is None:
            return None
        if text.strip() == "" or "\x00" in text:
            self.add(
                location,
                f"'path' is empty or contains NUL; found {_found(text)}; allowed: {allowed}",
                line,
            )
            return None
        used: list[str] = []

        def value_of(name: str) -> str:
            used.append(name)
            return str(self.neo_home())

        try:
            expanded = expand_path_variables(text, value_of)
        except PathVariableError as error:
            self.add(
                location,
                f"'path' {error}; found {_found(text)}; allowed: {allowed}, where "
                "${NEO_HOME} (the data root, NEO_HOME) is the only variable (environment "
                "variables are not expanded) and '$$' is a literal '$'",
                line,
            )
            return None
        except SettingsError as error:
            self.add(
                location,
                f"'path' uses ${{NEO_HOME}}, but the settings cannot be read "
                f"({' '.join(str(error).split())}); found {_found(text)}; allowed: valid "
                "NEO_* settings (fix the variable named)",
                line,
            )
            return None
        declared = Path(os.path.expanduser(expanded))
        path_notes = ""
        if used:
            path_notes = f" (${{NEO_HOME}} is {str(self.neo_home())!r})"
        if not declared.is_absolute():
            declared = self.base_dir / declared
            path_notes += f" (relative paths resolve against {str(self.base_dir)!r})"
        try:
            resolved = declared.resolve()
        except (OSError, RuntimeError) as error:  # a symlink loop, a name too long
            self.add(
                location,
                f"'path' cannot be resolved ({error}); found {_found(text)}{path_notes}; "
                f"allowed: {allowed}",
                line,
            )
            return None
        where = f"found {_found(text)}, which resolves to {str(resolved)!r}{path_notes}"
        if self.allowed_roots is not None and not any(
            resolved.is_relative_to(root) for root in self.allowed_roots
        ):
            roots = ", ".join(repr(str(root)) for root in self.allowed_roots) or "(none)"
            self.add(
                location,
                f"repo path is outside the allowed roots; {where}; allowed: a directory "
                f"under one of {roots}",
                line,
            )
            return None
        if not self.check_paths:
            return resolved
        try:
            mode = resolved.stat().st_mode
        except FileNotFoundError:
            self.add(
                location,
                f"repo directory does not exist; {where}; allowed: an existing directory "
                "(a git work tree or a plain directory)",
                line,
            )
            return None
        except OSError as error:
            self.add(
                location,
                f"repo directory cannot be inspected ({error.strerror or error}); {where}; "
                "allowed: an existing directory this process can read",
                line,
            )
            return None
        if not stat.S_ISDIR(mode):
            kind = "a file" if stat.S_ISREG(mode) else "not a directory"
            self.add(
                location,
                f"repo path is {kind}, not a directory; {where}; allowed: a directory "
                "(a git work tree or a plain directory)",
                line,
            )
            return None
        if not os.access(resolved, os.R_OK | os.X_OK):
            self.add(
                location,
                f"repo directory is not readable by this process; {where}; allowed: a "
                "directory this process can list and read",
                line,
            )
            return None
        return resolved

    def ref(self, value: object, location: str, line: int | None) -> str | None:
        allowed = (
            "a branch, tag or commit name as git accepts it: 1-255 characters, no "
            "whitespace or control characters, none of ~ ^ : ? * [ \\, no '..' or '@{', "
            "not starting with '-' or '/', not ending with '/', '.' or '.lock'"
        )
        text = self.string(value, location, line, "'ref'", allowed)
        if text is None:
            return None
        defect = ref_defect(text)
        if defect is not None:
            self.add(
                location, f"invalid 'ref': {defect}; found {_found(text)}; allowed: {allowed}", line
            )
            return None
        return text

    def parser(self, raw: object, location: str, line: int | None) -> ParserDecl | None:
        if not isinstance(raw, dict):
            self.add(
                location,
                f"'parser' must be a mapping; found {_found(raw)}; allowed: a mapping with "
                f"keys {', '.join(PARSER_KEYS)}, e.g. {{id: neo-code, version: 1.0.0}}",
                line,
            )
            return None
        before = len(self.problems)
        self.keys(raw, location, PARSER_KEYS, ("id", "version"), "a parser")
        parser_id = None
        if raw.get("id") is not None:
            parser_id = self.ident(raw["id"], f"{location}.id", _key_line(raw, "id"), "parser id")
        version = None
        if raw.get("version") is not None:
            version = self.version(raw["version"], f"{location}.version", _key_line(raw, "version"))
        exclude: tuple[str, ...] = ()
        if raw.get("exclude") is not None:
            exclude = self.exclude(raw["exclude"], f"{location}.exclude", _key_line(raw, "exclude"))
        secret_files: tuple[str, ...] | None = None
        if raw.get("secret_files") is not None:
            secret_files = self.exclude(
                raw["secret_files"], f"{location}.secret_files", _key_line(raw, "secret_files")
            )
        if parser_id is not None:
            # Only parsers that exist, at versions they have (sources/rules/parser_versions.py).
            problem = unknown_parser_problem(parser_id)
            if problem is not None:
                self.add(f"{location}.id", problem, _key_line(raw, "id"))
                return None
        if parser_id == NEO_CODE and version is not None:
            problem = unsupported_version_problem(version)
            if problem is not None:
                self.add(f"{location}.version", problem, _key_line(raw, "version"))
                return None
        if len(self.problems) != before or parser_id is None or version is None:
            return None
        return ParserDecl(id=parser_id, version=version, exclude=exclude, secret_files=secret_files)

    def version(self, value: object, location: str, line: int | None) -> str | None:
        text = self.string(value, location, line, "'version'", _VERSION_ALLOWED)
        if text is None:
            return None
        if is_semver(text):
            return text
        self.add(
            location,
            f"'version' is not a semantic version; found {_found(text)}; "
            f"allowed: {_VERSION_ALLOWED}",
            line,
        )
        return None

    def exclude(self, value: object, location: str, line: int | None) -> tuple[str, ...]:
        allowed = (
            "a list of glob strings matched against repo-relative paths, e.g. "
            '["vendor/**", "*.min.js"]: each non-empty, at most '
            f"{MAX_EXCLUDE_GLOB_LENGTH} characters, no NUL, not absolute, no '..' segment"
        )
        if not isinstance(value, list):
            hint = (
                f" (write it as a list: [{value!r}])"
                if isinstance(value, str) and len(value) < 60
                else ""
            )
            self.add(
                location,
                f"'exclude' must be a list; found {_found(value)}{hint}; allowed: {allowed}",
                line,
            )
            return ()
        globs: list[str] = []
        for index, item in enumerate(value):
            item_location = f"{location}[{index}]"
            item_line = _item_line(value, index)
            text = self.string(item, item_location, item_line, "an exclude glob", allowed)
            if text is None:
                continue
            defect = glob_defect(text)
            if defect is not None:
                self.add(
                    item_location,
                    f"invalid exclude glob: {defect}; found {_found(text)}; allowed: {allowed}",
                    item_line,
                )
                continue
            globs.append(text)
        return tuple(globs)

    def cadence(self, value: object, location: str, line: int | None) -> int | None:
        allowed = (
            f"a whole number of minutes from 1 to {MAX_CADENCE_MINUTES} (one year), or omit it"
        )
        if isinstance(value, bool) or not isinstance(value, int):
            hint = ""
            if isinstance(value, bool):
                hint = " (YAML reads unquoted yes/no/on/off/true/false as booleans)"
            elif isinstance(value, str) and value.strip().isdigit():
                hint = " (write the number without quotes)"
            self.add(
                location,
                f"'cadence_minutes' must be an integer; found {_found(value)}{hint}; "
                f"allowed: {allowed}",
                line,
            )
            return None
        if not 1 <= value <= MAX_CADENCE_MINUTES:
            self.add(
                location,
                f"'cadence_minutes' is out of range; found {_found(value)}; allowed: {allowed}",
                line,
            )
            return None
        return value


# --------------------------------------------------------------------------- loading


def _read_text(path: Path, add: Callable[[str, int | None], None]) -> str | None:
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        add(
            f"tenants file not found; found nothing at {str(path)!r}; allowed: an existing "
            f"YAML file: {_HOW_TO_CREATE}",
            None,
        )
        return None
    except OSError as error:
        add(
            f"tenants file cannot be inspected ({error.strerror or error}); allowed: a "
            f"readable YAML file: {_HOW_TO_CREATE}",
            None,
        )
        return None
    if stat.S_ISDIR(mode):
        add(
            f"tenants file is a directory; found a directory at {str(path)!r}; allowed: "
            f"a YAML file (e.g. {str(path / 'tenants.yaml')!r}): {_HOW_TO_CREATE}",
            None,
        )
        return None
    if not stat.S_ISREG(mode):
        # Never open a FIFO or device: reading it could block forever.
        add(
            "tenants file is not a regular file (a FIFO, socket or device); allowed: a "
            f"regular YAML file: {_HOW_TO_CREATE}",
            None,
        )
        return None
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_TENANTS_FILE_BYTES + 1)
    except OSError as error:
        add(
            f"tenants file cannot be read ({error.strerror or error}); allowed: a YAML "
            "file this process can read (check its permissions)",
            None,
        )
        return None
    if len(data) > MAX_TENANTS_FILE_BYTES:
        add(
            f"tenants file is larger than {MAX_TENANTS_FILE_BYTES} bytes; allowed: a "
            f"YAML file of at most {MAX_TENANTS_FILE_BYTES} bytes",
            None,
        )
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        add(
            f"tenants file is not valid UTF-8 (byte {error.start}: "
            f"{data[error.start : error.start + 1]!r}); allowed: UTF-8 text",
            line,
        )
        return None


def _parse_yaml(text: str, add: Callable[[str, int | None], None]) -> tuple[bool, object]:
    try:
        return True, yaml.load(text, Loader=_StrictLoader)  # _StrictLoader is a safe loader
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        problem = error.problem or "unparseable"
        context = f" ({error.context})" if error.context else ""
        if mark is None:
            add(f"invalid YAML: {problem}{context}; found no position; allowed: valid YAML", None)
            return False, None
        source_lines = text.splitlines()
        found = "the end of the file"
        if 0 <= mark.line < len(source_lines):
            found = f"the line {_short_repr(source_lines[mark.line])}"
        add(
            f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: "
            f"{problem}{context}; found {found}; allowed: valid YAML (a mapping with a "
            "'tenants' list)",
            mark.line + 1,
        )
    except yaml.YAMLError as error:
        add(f"invalid YAML; found {_short_repr(str(error))}; allowed: valid YAML", None)
    except RecursionError:
        add("invalid YAML; found nesting too deep to read; allowed: the tenants schema", None)
    return False, None


@dataclass(frozen=True, slots=True)
class TenantsReading:
    """What ``read_tenants`` found: every problem, the tenant blocks with their problems
    attributed (declaration/rules.py), the problems of the file as a whole, and whether
    the file gave tenant blocks at all (False: unreadable, not YAML, no usable list)."""

    path: Path
    problems: tuple[ConfigProblem, ...]
    blocks: tuple[TenantBlock, ...]
    file_problems: tuple[ConfigProblem, ...]
    readable: bool
    tenants: tuple[Tenant, ...]


_TENANTS_KEY_LINE = re.compile(r"tenants:[ \t]*(?:#.*)?")
_ITEM_ID_LINE = re.compile(
    r"(?:-[ \t]+)?id:[ \t]*(['\"]?)([a-z0-9][a-z0-9-]{0,62})\1[ \t]*(?:#.*)?"
)


@dataclass(frozen=True, slots=True)
class _SplitBlock:
    """One item of the top-level 'tenants' list, parsed on its own: its index, first
    line, the item (when it parses) or its YAML problem, and the id its text names."""

    index: int
    line: int
    parsed: bool
    item: object
    problem: "ConfigProblem | None"
    named: str | None


def _blank_except(lines: list[str], keep: range, header: int) -> str:
    """The text with every line outside ``keep`` (and the 'tenants:' line) blanked, so
    a part parses alone and keeps its line numbers."""
    kept = [line if index in keep else "" for index, line in enumerate(lines)]
    kept[header] = "tenants:"
    return "\n".join(kept)


def _split_tenant_blocks(text: str) -> list[_SplitBlock] | None:
    """When the whole file is not valid YAML: its 'tenants' list item by item, so a YAML
    problem inside one tenant's block stays in that block. None when the problem is not
    confined to list items (the list cannot be found, is written in flow style, or the
    text around it does not parse): the file as a whole is then unusable."""
    lines = text.split("\n")
    header = next(
        (i for i, line in enumerate(lines) if _TENANTS_KEY_LINE.fullmatch(line.rstrip("\r"))),
        None,
    )
    if header is None:
        return None
    starts: list[int] = []
    indent: int | None = None
    end = len(lines)
    for index in range(header + 1, len(lines)):
        line = lines[index].rstrip("\r")
        body = line.lstrip(" ")
        if not body or body.startswith("#"):
            continue
        column = len(line) - len(body)
        is_item = body.startswith("- ") or body == "-"
        if indent is None:
            if not is_item:
                return None
            indent = column
        if column < indent or (column == 0 and not is_item):
            end = index
            break
        if column == indent and is_item:
            starts.append(index)
    if not starts:
        return None
    spans = list(zip(starts, [*starts[1:], end], strict=True))
    around = "\n".join("" if starts[0] <= i < end else line for i, line in enumerate(lines))
    ok, _ = _parse_yaml(around, lambda *_: None)
    if not ok:
        return None
    blocks: list[_SplitBlock] = []
    for index, (first, stop) in enumerate(spans):
        found: list[ConfigProblem] = []
        ok, data = _parse_yaml(
            _blank_except(lines, range(first, stop), header),
            lambda message, line, found=found, at=f"tenants[{index}]": found.append(
                ConfigProblem(at, message, line)
            ),
        )
        item = data.get("tenants", [None])[0] if ok and isinstance(data, dict) else None
        named = None
        for raw in lines[first:stop]:
            body = raw.rstrip("\r").lstrip(" ")
            column = len(raw) - len(raw.lstrip(" "))
            if column in (indent, (indent or 0) + 2) and (match := _ITEM_ID_LINE.fullmatch(body)):
                named = match.group(2)
                break
        problem = found[0] if found else None
        if problem is not None and (problem.line is None or problem.line > stop):
            # Reading on past the block (an unclosed bracket or quote): name the block.
            problem = ConfigProblem(
                problem.location,
                f"{problem.message} (the YAML of this tenant's block, lines {first + 1}-"
                f"{stop}, is not closed)",
                first + 1,
            )
        blocks.append(_SplitBlock(index, first + 1, ok, item, problem, named))
    if all(block.parsed for block in blocks):
        return None  # the problem is elsewhere: not confined to one block
    return blocks


def read_tenants(
    path: str | os.PathLike[str],
    allowed_roots: Sequence[str | os.PathLike[str]] | None = None,
    check_paths: bool = True,
    home: str | os.PathLike[str] | None = None,
    *,
    by_block: bool = True,
) -> TenantsReading:
    """Read and validate a tenants file without refusing it: every problem is returned,
    attributed to its tenant block or repo entry where it has one (the arguments are
    ``load_tenants``'s). ``by_block``: when the whole file is not valid YAML, read its
    'tenants' list item by item, so a YAML problem inside one block is that block's."""
    file_path = Path(os.path.abspath(os.fspath(path)))
    problems: list[ConfigProblem] = []

    def add_file_problem(message: str, line: int | None) -> None:
        problems.append(ConfigProblem("(file)", message, line))

    def unreadable() -> TenantsReading:
        return TenantsReading(file_path, tuple(problems), (), tuple(problems), False, ())

    text = _read_text(file_path, add_file_problem)
    if text is None:
        return unreadable()
    parsed, data = _parse_yaml(text, add_file_problem)
    if not parsed:
        split = _split_tenant_blocks(text) if by_block else None
        if split is None:
            return unreadable()
        del problems[:]  # each block says its own YAML problem instead
    roots = None
    if allowed_roots is not None:
        roots = tuple(Path(os.path.expanduser(os.fspath(root))).resolve() for root in allowed_roots)
    validator = _Validator(
        base_dir=file_path.parent,
        allowed_roots=roots,
        check_paths=check_paths,
        problems=problems,
        home=None if home is None else Path(os.path.expanduser(os.fspath(home))).resolve(),
    )
    tenants = validator.top(data) if parsed else validator.blocks_apart(split)
    in_blocks = {
        id(problem)
        for block in validator.blocks
        for problem in (
            *block.problems,
            *block.unnamed_repo_problems,
            *(p for found in block.repo_problems.values() for p in found),
        )
    }
    return TenantsReading(
        path=file_path,
        problems=tuple(problems),
        blocks=tuple(validator.blocks),
        file_problems=tuple(p for p in problems if id(p) not in in_blocks),
        readable=bool(validator.blocks),
        tenants=tenants,
    )


def load_tenants(
    path: str | os.PathLike[str],
    allowed_roots: Sequence[str | os.PathLike[str]] | None = None,
    check_paths: bool = True,
    home: str | os.PathLike[str] | None = None,
) -> TenantsFile:
    """Read and validate a tenants file; raise ``TenantsConfigError`` with every problem.

    - Relative repo paths resolve against the file's own folder; ``~`` expands, and so
      does ``${NEO_HOME}``: to ``home`` when given (callers holding settings pass their
      ``home_dir``), else to the settings' ``home_dir`` (NEO_HOME, default ``./.neo``
      from the current directory). Any other ``${NAME}`` is a problem; ``$$`` is ``$``.
    - ``allowed_roots``: when given, a repo path (after resolving symlinks) outside all of
      them is refused.
    - ``check_paths``: when True (default) each repo path must be an existing, readable
      directory, and ``ref`` is refused for a plain (non-git) directory. False skips the
      filesystem checks (the schema, ids, duplicates and allowed roots are still checked),
      for callers that want to record a missing repo per repo instead of refusing all.
    """
    reading = read_tenants(path, allowed_roots, check_paths, home, by_block=False)
    if reading.problems:
        raise TenantsConfigError(reading.path, reading.problems)
    return TenantsFile(path=reading.path, tenants=reading.tenants)
