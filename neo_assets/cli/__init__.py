"""`neo-assets`: the command line for people at a terminal (see ``app``)."""

from neo_assets.cli.app import app, main

__all__ = ["app", "main"]
