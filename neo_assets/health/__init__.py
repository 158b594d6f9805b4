"""Provider health: the canary, the collection freeze and its re-probe (the shell around
``core/canary.py`` and ``core/freeze.py``)."""
