"""Reading tenants.yaml: the file's text (never a FIFO, never too large), its YAML, and
each part validated on its own (tenants/models.py): the top level, each tenant, each
repo entry, so a mistake stays in its tenant or repo entry (``read_tenants``), or one
error listing every problem (``load_tenants``)."""

import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from neo_assets.declaration.rules import TenantBlock
from neo_assets.tenants.blocks import SplitBlock, split_tenant_blocks
from neo_assets.tenants.declarations import RepoDecl, Tenant, TenantsFile
from neo_assets.tenants.models import RepoModel, Strict, TenantModel, TopModel
from neo_assets.tenants.paths import PathRules
from neo_assets.tenants.problems import ConfigProblem, TenantsConfigError, found_value
from neo_assets.tenants.rules import MAX_TENANTS_FILE_BYTES, is_valid_id
from neo_assets.tenants.translate import problems_of
from neo_assets.tenants.yaml_marks import item_line, parse_yaml

_HOW_TO_CREATE = (
    "create it (copy examples/tenants.yaml and edit it), or set NEO_TENANTS_FILE to the "
    "path of an existing tenants file"
)


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


def _validated(
    model: type[Strict], raw: object, location: str, line: int | None, context: dict[str, Any]
) -> tuple[Any, list[ConfigProblem]]:
    """``raw`` as ``model`` (None when it is not one) and every problem with it."""
    try:
        return model.model_validate(raw, context=context), []
    except ValidationError as error:
        return None, problems_of(error, model, raw, location, line)


@dataclass(slots=True)
class _Reader:
    """The file's parts validated in order; ``problems`` in file order, ``blocks`` what
    each tenant block says with its problems attributed (declaration/rules.py)."""

    paths: PathRules
    problems: list[ConfigProblem] = field(default_factory=list)
    blocks: list[TenantBlock] = field(default_factory=list)

    def top(self, data: object) -> tuple[Tenant, ...]:
        if data is None:
            self.problems.append(
                ConfigProblem(
                    "(file)",
                    "the file is empty (or only comments); found no YAML document; allowed: a "
                    "mapping with a 'tenants' list, e.g. 'tenants: [{id: acme, repos: [...]}]'",
                )
            )
            return ()
        if not isinstance(data, dict):
            hint = (
                " (put the list under a top-level 'tenants:' key)" if isinstance(data, list) else ""
            )
            message = (
                f"the top level must be a mapping; found {found_value(data)}{hint}; allowed: a "
                "mapping with exactly one key, 'tenants'"
            )
            self.problems.append(ConfigProblem("(file)", message, getattr(data, "line", 1)))
            return ()
        self.problems += _validated(TopModel, data, "", getattr(data, "line", None), {})[1]
        raw_tenants = data.get("tenants")
        if not isinstance(raw_tenants, list):
            return ()
        seen: dict[str, int] = {}
        built = [
            self.tenant(raw, index, item_line(raw_tenants, index), seen)
            for index, raw in enumerate(raw_tenants)
        ]
        return tuple(tenant for tenant in built if tenant is not None)

    def blocks_apart(self, split: list[SplitBlock]) -> tuple[Tenant, ...]:
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
        raw_id = raw.get("id") if isinstance(raw, dict) else None
        named = raw_id if is_valid_id(raw_id) and raw_id not in seen else None
        location = f"tenants[{index}]" if named is None else f"tenants[{named!r}]"
        own = _validated(TenantModel, raw, location, line, {"seen_tenants": seen})[1]
        if named is not None:
            seen[named] = index
        self.problems += own
        raw_repos = raw.get("repos") if isinstance(raw, dict) else None
        if not isinstance(raw_repos, list):
            if named is not None and not own:  # cannot happen today: no message names it
                own = [ConfigProblem(location, "the tenant cannot be used", line)]
            self.blocks.append(TenantBlock(named, tuple(own)))
            return None
        repos: list[RepoDecl] = []
        repo_problems: dict[str, tuple[ConfigProblem, ...]] = {}
        unnamed: list[ConfigProblem] = []
        seen_slugs: dict[str, int] = {}
        for repo_index, raw_repo in enumerate(raw_repos):
            slug, repo, found = self.repo(
                raw_repo, location, repo_index, item_line(raw_repos, repo_index), seen_slugs
            )
            self.problems += found
            if found and slug is not None:
                repo_problems[slug] = tuple(found)
            else:
                unnamed += found
            if repo is not None:
                repos.append(repo)
        if named is None:
            self.blocks.append(TenantBlock(None, (*own, *unnamed)))
            return None
        usable = {repo.slug: repo.to_plain() for repo in repos}
        self.blocks.append(TenantBlock(named, tuple(own), usable, repo_problems, tuple(unnamed)))
        if len(repos) != len(raw_repos):
            return None
        return Tenant(id=named, repos=tuple(repos))

    def repo(
        self, raw: object, tenant_location: str, index: int, line: int | None, seen: dict[str, int]
    ) -> tuple[str | None, RepoDecl | None, list[ConfigProblem]]:
        """The entry's slug when it names one, the repo when it is valid, its problems."""
        raw_slug = raw.get("slug") if isinstance(raw, dict) else None
        slug = raw_slug if is_valid_id(raw_slug) and raw_slug not in seen else None
        location = f"{tenant_location}.repos[{index if slug is None else repr(slug)}]"
        context = {"seen_slugs": seen, "tenant_location": tenant_location, "paths": self.paths}
        model, found = _validated(RepoModel, raw, location, line, context)
        if slug is not None:
            seen[slug] = index
        return slug, None if model is None else model.to_decl(), found


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
    parsed, data = parse_yaml(text, add_file_problem)
    split = None
    if not parsed:
        split = split_tenant_blocks(text) if by_block else None
        if split is None:
            return unreadable()
    roots = None
    if allowed_roots is not None:
        roots = tuple(Path(os.path.expanduser(os.fspath(root))).resolve() for root in allowed_roots)
    reader = _Reader(
        PathRules(
            base_dir=file_path.parent,
            allowed_roots=roots,
            check_paths=check_paths,
            home=None if home is None else Path(os.path.expanduser(os.fspath(home))).resolve(),
        )
    )
    tenants = reader.top(data) if split is None else reader.blocks_apart(split)
    in_blocks = {
        id(problem)
        for block in reader.blocks
        for problem in (
            *block.problems,
            *block.unnamed_repo_problems,
            *(p for found in block.repo_problems.values() for p in found),
        )
    }
    return TenantsReading(
        path=file_path,
        problems=tuple(reader.problems),
        blocks=tuple(reader.blocks),
        file_problems=tuple(p for p in reader.problems if id(p) not in in_blocks),
        readable=bool(reader.blocks),
        tenants=tenants,
    )


def load_tenants(
    path: str | os.PathLike[str],
    allowed_roots: Sequence[str | os.PathLike[str]] | None = None,
    check_paths: bool = True,
    home: str | os.PathLike[str] | None = None,
) -> TenantsFile:
    """Read and validate a tenants file; raise ``TenantsConfigError`` with every problem.
    Relative paths resolve against the file's folder; ``~`` and ``${NEO_HOME}`` expand (any
    other ``${NAME}`` is a problem, ``$$`` is ``$``). ``allowed_roots`` confine repo paths;
    ``check_paths`` False skips the filesystem checks."""
    reading = read_tenants(path, allowed_roots, check_paths, home, by_block=False)
    if reading.problems:
        raise TenantsConfigError(reading.path, reading.problems)
    return TenantsFile(path=reading.path, tenants=reading.tenants)
