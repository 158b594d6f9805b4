"""Reconciliation: which rows of a tenant are orphans, and reclaiming them.

``rules/`` holds every rule (pure: classification, the no-hole and containment checks, the
reclaim gate, retirement, the triggers); the modules beside it read the tenant's rows and
ledger records, re-stamp and reclaim, and evaluate the asset checks; ``defs.py`` is the
Dagster job, checks and sensors; ``cli.py`` is ``neo-assets reconcile``.
"""
