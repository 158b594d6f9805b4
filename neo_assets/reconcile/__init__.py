"""Reconciliation's I/O glue: read a tenant's rows and records, call the rules in
``neo_assets.core.reconcile.orphans*``, re-stamp and reclaim, and evaluate the asset checks.

Every rule lives in ``core``; these modules only read, write and report.
"""
