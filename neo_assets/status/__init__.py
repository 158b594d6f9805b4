"""Status: what a tenant, repo and generation stand at (rules.py pure, report.py reads, defs.py the asset)."""
