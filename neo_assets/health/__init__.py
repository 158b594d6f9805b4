"""Provider health: the canary, the collection freeze and its re-probe.

``rules/`` holds the verdicts (pure: ``rules/canary.py``, ``rules/freeze.py``); the modules
beside it probe the provider, keep the canary and freeze records in the ledger
(``records.py``; their schema is ``store/health_schema.py``) and decide with the rules;
``defs.py`` is the Dagster sensors and asset; ``cli.py`` is ``neo-assets canary`` and
``neo-assets unfreeze``.
"""
