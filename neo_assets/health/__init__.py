"""Provider health: the canary, the collection freeze and its re-probe (the shell around
``core/health/canary.py`` and ``core/health/freeze.py``)."""
