"""What a valid tenants file declares: frozen dataclasses, their canonical plain form
(which feeds the declaration digests) and its inverse, for last good declarations."""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neo_assets.core.ids.config_digest import declaration_digest, repo_declaration_digest
from neo_assets.declaration.rules import SOURCE_FILE, Misdeclared
from neo_assets.secrets.rules import DEFAULT_SECRET_FILE_GLOBS
from neo_assets.tenants.problems import ConfigProblem


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
    """A validated tenants file (``path`` absolute), as the declaration in force: ``tenants``
    may hold last good stand-ins; ``misdeclared``, ``withheld``, ``source`` (``file`` or
    ``last-good``) and ``file_problems`` say what; ``retires_nothing``: part of the file
    names no tenant, so nothing may be judged retired."""

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
