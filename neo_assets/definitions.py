"""The one Definitions object of the project (``dagster dev -m neo_assets.definitions``).

Each capability keeps its Dagster objects in its own ``defs/<capability>.py`` module; this file
only merges them and binds the shared resources.
"""

import gc

import dagster as dg

import neo_assets.health.defs as health_defs
import neo_assets.reconcile.defs as reconciliation_defs
from neo_assets.alerts import defs as alerts_defs
from neo_assets.declaration import defs as declaration_defs
from neo_assets.defs.resources import default_resources
from neo_assets.links import defs as links_defs
from neo_assets.quality import defs as quality_defs
from neo_assets.status import defs as status_defs
from neo_assets.store.private_files import owner_only_umask
from neo_assets.sweep import defs as sweep_defs

# The code server and every run process import this module: what they write under
# NEO_HOME (the ledger, Chroma's files, Dagster's storage) is the owner's only.
owner_only_umask()

defs = dg.Definitions.merge(
    sweep_defs.defs,
    status_defs.defs,
    alerts_defs.defs,
    health_defs.defs,
    reconciliation_defs.defs,
    links_defs.defs,
    declaration_defs.defs,
    quality_defs.defs,
    dg.Definitions(resources=default_resources()),
)

# What the imports above built (Dagster, Chroma, pandas, pydantic: several hundred thousand
# objects) lives as long as the process. Frozen, it is no longer walked by every full
# garbage collection that a sweep's allocations trigger: a forced sweep of an unchanged
# 2,000-file repo spent about half its chunk stage in those walks.
gc.freeze()
