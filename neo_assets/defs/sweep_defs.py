"""The sweep capability: the per-repo sweep step, the status snapshot, jobs, the sensor."""

import dagster as dg

from neo_assets.defs.jobs import status_job, sweep_job
from neo_assets.defs.sensors import sweep_sensor
from neo_assets.defs.sweep import kb_status, sweep_repo

defs = dg.Definitions(
    assets=[sweep_repo, kb_status],
    jobs=[sweep_job, status_job],
    sensors=[sweep_sensor],
)
