"""The one Definitions object of the project (``dagster dev -m neo_assets.definitions``).

Each capability keeps its Dagster objects in its own ``defs/*_defs.py`` module; this file
only merges them and binds the shared resources.
"""

import dagster as dg

from neo_assets.defs import sweep_defs
from neo_assets.defs.resources import default_resources

defs = dg.Definitions.merge(
    sweep_defs.defs,
    dg.Definitions(resources=default_resources()),
)
