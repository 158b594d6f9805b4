"""tenants.yaml's schema as pydantic models: strict types, no unknown keys, the project's
own message for every check (``problem``), and the words ``tenants/translate.py`` reads
(``WORDS``, ``MESSAGES``, ``PHASES``). A null value is not given."""

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from neo_assets.sources.rules.parser_versions import (
    NEO_CODE,
    unknown_parser_problem,
    unsupported_version_problem,
)
from neo_assets.tenants.declarations import ParserDecl, RepoDecl
from neo_assets.tenants.paths import PATH_ALLOWED, PathProblem, PathRules, is_git_work_tree
from neo_assets.tenants.problems import found_value
from neo_assets.tenants.rules import (
    _ID_ALLOWED,
    _VERSION_ALLOWED,
    MAX_CADENCE_MINUTES,
    MAX_EXCLUDE_GLOB_LENGTH,
    REPO_KEYS,
    glob_defect,
    id_defects,
    is_semver,
    is_valid_id,
    ref_defect,
)

Message = Callable[[object], str]

REF_ALLOWED = (
    "a branch, tag or commit name as git accepts it: 1-255 characters, no "
    "whitespace or control characters, none of ~ ^ : ? * [ \\, no '..' or '@{', "
    "not starting with '-' or '/', not ending with '/', '.' or '.lock'"
)
GLOBS_ALLOWED = (
    "a list of glob strings matched against repo-relative paths, e.g. "
    '["vendor/**", "*.min.js"]: each non-empty, at most '
    f"{MAX_EXCLUDE_GLOB_LENGTH} characters, no NUL, not absolute, no '..' segment"
)
CADENCE_ALLOWED = (
    f"a whole number of minutes from 1 to {MAX_CADENCE_MINUTES} (one year), or omit it"
)


def problem(kind: str, message: str) -> PydanticCustomError:
    """A failed check, its message as users read it. It rides in the context: as the
    template, its own braces ('${NEO_HOME}', '{id: ...}') would be read as fields."""
    return PydanticCustomError(kind, "{message}", {"message": message})


def _once(seen: dict[str, int], key: str, what: str, where: str, allowed: str) -> None:
    """A name declared again: ``seen`` maps each one so far to its index under ``where``."""
    if key in seen:
        raise problem(
            "duplicate",
            f"duplicate {what}; found {key!r}, already declared at {where}[{seen[key]}]; "
            f"allowed: {allowed}",
        )


def _passes(says: str, defect_of: Callable[[str], str | None], allowed: str) -> AfterValidator:
    """A string's check: ``defect_of`` says why it fails (None: it passes)."""

    def check(text: str) -> str:
        defect = defect_of(text)
        if defect is not None:
            found = found_value(text)
            raise problem("invalid", f"{says}{defect}; found {found}; allowed: {allowed}")
        return text

    return AfterValidator(check)


def _id(what: str) -> AfterValidator:
    def defects(text: str) -> str | None:
        return None if is_valid_id(text) else "; ".join(id_defects(text))

    return _passes(f"invalid {what}: ", defects, _ID_ALLOWED)


def _not_semver(text: str) -> str | None:
    return None if is_semver(text) else ""


Glob = Annotated[str, _passes("invalid exclude glob: ", glob_defect, GLOBS_ALLOWED)]


def _globs_not_a_list(value: object) -> str:
    hint = (
        f" (write it as a list: [{value!r}])" if isinstance(value, str) and len(value) < 60 else ""
    )
    return f"'exclude' must be a list; found {found_value(value)}{hint}; allowed: {GLOBS_ALLOWED}"


def _cadence_not_an_integer(value: object) -> str:
    hint = ""
    if isinstance(value, bool):
        hint = " (YAML reads unquoted yes/no/on/off/true/false as booleans)"
    elif isinstance(value, str) and value.strip().isdigit():
        hint = " (write the number without quotes)"
    return (
        f"'cadence_minutes' must be an integer; found {found_value(value)}{hint}; "
        f"allowed: {CADENCE_ALLOWED}"
    )


def _cadence_out_of_range(value: object) -> str:
    return (
        f"'cadence_minutes' is out of range; found {found_value(value)}; allowed: {CADENCE_ALLOWED}"
    )


class Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    WHAT: ClassVar[str]  # the mapping, as 'unknown key in ...' names it
    PHASES: ClassVar[tuple[str, ...]]  # fields and check kinds, in the order problems list
    WORDS: ClassVar[dict[str, tuple[str, str]]] = {}  # field -> (what it is, what is allowed)
    MESSAGES: ClassVar[dict[tuple[str, str], Message]] = {}  # (field, error type) -> message
    NESTED: ClassVar[dict[str, type["Strict"]]] = {}  # field -> the model it holds
    MAPPING: ClassVar[str] = ""  # what 'must be a mapping' names, when it is not one
    EXAMPLE: ClassVar[str] = ""  # after the keys it allows

    @model_validator(mode="before")
    @classmethod
    def _null_is_not_given(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value is not None}
        return data

    @classmethod
    def not_a_mapping(cls, value: object) -> str:
        return (
            f"{cls.MAPPING} must be a mapping; found {found_value(value)}; allowed: a mapping "
            f"with keys {', '.join(cls.model_fields)}{cls.EXAMPLE}"
        )


class TopModel(Strict):
    WHAT = "the top level"
    PHASES = ("extra", "missing", "tenants")
    MESSAGES = {
        ("tenants", "list_type"): lambda value: (
            f"'tenants' must be a list of tenants; found {found_value(value)}"
            + (
                " (write each tenant as a list item: '- id: acme')"
                if isinstance(value, dict)
                else ""
            )
            + "; allowed: a non-empty list of mappings with keys id, repos"
        ),
        ("tenants", "too_short"): lambda value: (
            "'tenants' is empty; found []; allowed: a non-empty list of tenants "
            "(each a mapping with keys id, repos)"
        ),
    }

    tenants: Annotated[list[Any], Field(min_length=1)]


class TenantModel(Strict):
    """One tenant, its repos unread (each is validated on its own, ``RepoModel``)."""

    WHAT = "a tenant"
    MAPPING = "each tenant"
    PHASES = ("id", "extra", "missing", "repos")
    WORDS = {"id": ("tenant id", _ID_ALLOWED)}
    MESSAGES = {
        ("repos", "list_type"): lambda value: (
            f"'repos' must be a list of repos; found {found_value(value)}"
            + (
                " (write each repo as a list item: '- slug: widgets')"
                if isinstance(value, dict)
                else ""
            )
            + f"; allowed: a list of mappings with keys {', '.join(REPO_KEYS)} (may be empty)"
        ),
    }

    id: Annotated[str, _id("tenant id")]
    repos: list[Any]

    @field_validator("id")
    @classmethod
    def _once_in_the_file(cls, tenant_id: str, info: ValidationInfo) -> str:
        seen = info.context["seen_tenants"]
        _once(seen, tenant_id, "tenant id", "tenants", "each tenant id once in the file")
        return tenant_id


class ParserModel(Strict):
    WHAT = "a parser"
    MAPPING = "'parser'"
    EXAMPLE = ", e.g. {id: neo-code, version: 1.0.0}"
    # Whether the parser exists is asked once the rest of it has been read.
    PHASES = (
        "extra",
        "missing",
        "id",
        "version",
        "exclude",
        "secret_files",
        "unknown_parser",
        "unsupported_version",
    )
    WORDS = {
        "id": ("parser id", _ID_ALLOWED),
        "version": ("'version'", _VERSION_ALLOWED),
        "exclude": ("an exclude glob", GLOBS_ALLOWED),
        "secret_files": ("an exclude glob", GLOBS_ALLOWED),
    }
    MESSAGES = {
        ("exclude", "list_type"): _globs_not_a_list,
        ("secret_files", "list_type"): _globs_not_a_list,
    }

    id: Annotated[str, _id("parser id")]
    version: Annotated[
        str, _passes("'version' is not a semantic version", _not_semver, _VERSION_ALLOWED)
    ]
    exclude: list[Glob] = []
    # None: the default secret globs (secrets/rules.DEFAULT_SECRET_FILE_GLOBS).
    secret_files: list[Glob] | None = None

    @field_validator("id")
    @classmethod
    def _exists(cls, parser_id: str) -> str:
        # Only parsers that exist, at versions they have (sources/rules/parser_versions.py).
        message = unknown_parser_problem(parser_id)
        if message is not None:
            raise problem("unknown_parser", message)
        return parser_id

    @field_validator("version")
    @classmethod
    def _has_version(cls, version: str, info: ValidationInfo) -> str:
        message = unsupported_version_problem(version)
        if info.data.get("id") == NEO_CODE and message is not None:
            raise problem("unsupported_version", message)
        return version

    def to_decl(self) -> ParserDecl:
        secret = None if self.secret_files is None else tuple(self.secret_files)
        return ParserDecl(self.id, self.version, tuple(self.exclude), secret)


class RepoModel(Strict):
    """One repo entry; its context holds the tenant's slugs so far (``seen_slugs``,
    slug -> index), the tenant's location and the ``PathRules``."""

    WHAT = "a repo"
    MAPPING = "each repo"
    PHASES = ("slug", "extra", "missing", "path", "ref", "parser", "cadence_minutes")
    WORDS = {
        "slug": ("repo slug", _ID_ALLOWED),
        "path": ("'path'", PATH_ALLOWED),
        "ref": ("'ref'", REF_ALLOWED),
    }
    MESSAGES = {
        ("cadence_minutes", "int_type"): _cadence_not_an_integer,
        ("cadence_minutes", "greater_than_equal"): _cadence_out_of_range,
        ("cadence_minutes", "less_than_equal"): _cadence_out_of_range,
    }
    NESTED = {"parser": ParserModel}

    slug: Annotated[str, _id("repo slug")]
    path: str  # absolute and resolved once validated
    ref: Annotated[str, _passes("invalid 'ref': ", ref_defect, REF_ALLOWED)] | None = None
    parser: ParserModel
    cadence_minutes: Annotated[int, Field(ge=1, le=MAX_CADENCE_MINUTES)] | None = None

    @field_validator("slug")
    @classmethod
    def _once_in_the_tenant(cls, slug: str, info: ValidationInfo) -> str:
        where = f"{info.context['tenant_location']}.repos"
        seen = info.context["seen_slugs"]
        _once(seen, slug, "repo slug in this tenant", where, "each slug once per tenant")
        return slug

    @field_validator("path")
    @classmethod
    def _resolved(cls, text: str, info: ValidationInfo) -> str:
        rules: PathRules = info.context["paths"]
        try:
            return str(rules.resolve(text))
        except PathProblem as error:
            raise problem("invalid", str(error)) from None

    @field_validator("ref")
    @classmethod
    def _of_a_git_work_tree(cls, ref: str, info: ValidationInfo) -> str:
        path = info.data.get("path")
        if path is not None and info.context["paths"].check_paths:
            if not is_git_work_tree(Path(path)):
                raise problem(
                    "invalid",
                    f"'ref' is only for git repositories, but {path!r} is a plain "
                    f"directory (no .git); found ref {ref!r}; allowed: omit 'ref' for a plain "
                    "directory, or point 'path' at the top of a git work tree",
                )
        return ref

    def to_decl(self) -> RepoDecl:
        return RepoDecl(
            self.slug, Path(self.path), self.ref, self.parser.to_decl(), self.cadence_minutes
        )
