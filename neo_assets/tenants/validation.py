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

This module is the one callers import; the parts: declarations.py (what a valid file
declares), models.py (the schema, pydantic), translate.py (its errors as problems),
problems.py, yaml_marks.py (the strict loader and its line marks), paths.py (repo paths),
blocks.py (a file split per tenant) and reading.py (reading and validating it).
"""

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
