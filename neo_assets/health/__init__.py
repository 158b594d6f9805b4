"""Provider health: the canary, the collection freeze and its re-probe. ``rules/`` holds the
verdicts (pure); the modules beside it probe, keep the records and decide with the rules.
Design: docs/design/health.md"""
