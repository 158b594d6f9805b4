"""The per-repo sweep job."""

import dagster as dg

from neo_assets.defs.partitions import tenant_repos

sweep_job = dg.define_asset_job(
    "sweep",
    # The four sweep assets are one step (``sweep_repo``); links have their own job.
    selection=dg.AssetSelection.assets(
        "repo_envelope", "chunk_generation", "kb_embeddings", "fence_census"
    ),
    partitions_def=tenant_repos,
    description="Sweep one tenant repo: envelope, chunks, embeddings, census.",
    tags={"neo/kind": "sweep"},
)
