"""The sweep capability: the per-repo sweep step, its job, the sensor."""

import dagster as dg

from neo_assets.defs.jobs import sweep_job
from neo_assets.defs.sensors import sweep_sensor
from neo_assets.defs.sweep import sweep_repo

defs = dg.Definitions(
    assets=[sweep_repo],
    jobs=[sweep_job],
    sensors=[sweep_sensor],
)
