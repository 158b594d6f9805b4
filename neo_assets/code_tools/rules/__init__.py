"""The code tools' rules (pure), becoming a package: everything is in tools.py for now."""

from neo_assets.code_tools.rules.tools import *  # noqa: F403
