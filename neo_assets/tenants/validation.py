"""tenants.yaml: the schema of what tenants declare, and its validation; the module callers
import. ``load_tenants`` returns a valid ``TenantsFile`` or raises one error listing
EVERY problem, before anything runs; ``read_tenants`` never refuses, attributing each
problem to its tenant or repo, each naming place, field, what was found and what is allowed."""

# The names callers import from here.
from neo_assets.tenants.declarations import ParserDecl, RepoDecl, Tenant, TenantsFile  # noqa: F401
from neo_assets.tenants.paths import (  # noqa: F401
    PathVariableError,
    expand_path_variables,
    is_git_work_tree,
)
from neo_assets.tenants.problems import ConfigProblem, TenantsConfigError  # noqa: F401
from neo_assets.tenants.reading import TenantsReading, load_tenants, read_tenants  # noqa: F401
from neo_assets.tenants.rules import (  # noqa: F401
    ID_PATTERN,
    MAX_PROBLEMS_SHOWN,
    MAX_TENANTS_FILE_BYTES,
    is_semver,
    is_valid_id,
)
