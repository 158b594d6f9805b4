"""Status: where each tenant, repo and generation stands (rules.py pure, report.py
reads the ledger, defs.py the asset and its refresh sensor)."""
