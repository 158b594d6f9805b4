"""Embedding generations: the one digest and which generation serves a tenant (rules.py,
pure), the services' view of them (serving.py) and their ledger records (records.py)."""
