"""Reconciliation: which rows of a tenant are orphans, and reclaiming them. ``rules/`` holds
every rule (pure); the modules beside it read, re-stamp, reclaim and evaluate the checks.
Design: docs/design/reconcile.md"""
