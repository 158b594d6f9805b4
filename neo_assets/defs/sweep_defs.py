"""The sweep capability: per-repo assets, the status snapshot, jobs and the sweep sensor."""

import dagster as dg

from neo_assets.defs.assets import (
    chunk_generation,
    fence_census,
    kb_embeddings,
    kb_status,
    repo_envelope,
)
from neo_assets.defs.jobs import status_job, sweep_job
from neo_assets.defs.sensors import sweep_sensor

defs = dg.Definitions(
    assets=[repo_envelope, chunk_generation, kb_embeddings, fence_census, kb_status],
    jobs=[sweep_job, status_job],
    sensors=[sweep_sensor],
)
