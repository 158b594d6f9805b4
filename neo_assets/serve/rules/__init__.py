"""The query service's pure rules: tenant tokens (tokens.py) and what a client may hold of
the service (transport.py)."""
