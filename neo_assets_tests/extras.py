"""Tests that need an optional extra skip with the reason where it is missing; CI installs
every extra and sets NEO_REQUIRE_EXTRAS, which turns such a skip into a failure (and the
MCP Inspector and the published ky package the code tools are checked on, with
NEO_REQUIRE_INSPECTOR)."""

import os
import shutil
from pathlib import Path

import pytest

from neo_assets.embedding.providers.sentence_transformers import extra_missing_reason


def require_sentence_transformers(model: str | None = None) -> None:
    """Skip (or, under NEO_REQUIRE_EXTRAS, fail) when the sentence-transformers extra (and
    the bundled model, for its aliases) cannot be imported here."""
    reason = extra_missing_reason(model)
    if reason is None:
        return
    if os.environ.get("NEO_REQUIRE_EXTRAS"):
        pytest.fail(f"{reason} (NEO_REQUIRE_EXTRAS is set: the extra must be installed)")
    pytest.skip(f"sentence-transformers extra not installed: {reason}")


# Where .ci/run installs the MCP Inspector (npm install --prefix); NEO_MCP_INSPECTOR names
# another install's bin.
INSPECTOR_DEFAULT = Path.home() / ".cache/neo-assets/mcp-inspector/node_modules/.bin/mcp-inspector"


def require_mcp_inspector() -> str:
    """The MCP Inspector's executable; skip (or, under NEO_REQUIRE_INSPECTOR, fail) when it
    is not installed here."""
    path = Path(os.environ.get("NEO_MCP_INSPECTOR") or INSPECTOR_DEFAULT)
    node = shutil.which("node")
    if path.is_file() and node:
        return str(path)
    reason = (
        f"the MCP Inspector is not installed at {path} (or node is missing): run "
        "`npm install --prefix ~/.cache/neo-assets/mcp-inspector "
        "@modelcontextprotocol/inspector@2.12.0` (--strict is a 2.x flag), as .ci/run does"
    )
    if os.environ.get("NEO_REQUIRE_INSPECTOR"):
        pytest.fail(f"{reason} (NEO_REQUIRE_INSPECTOR is set: it must be installed)")
    pytest.skip(reason)


# The published ky package (real code, npm's tarball): .ci/run fetches it with `npm pack`;
# NEO_KY_TARBALL names another copy.
KY_VERSION = "1.14.3"
KY_DEFAULT = Path.home() / f".cache/neo-assets/npm/ky-{KY_VERSION}.tgz"


def require_ky_tarball() -> Path:
    """The ky package's tarball; skip (or, under NEO_REQUIRE_INSPECTOR, fail) when it is
    not here."""
    path = Path(os.environ.get("NEO_KY_TARBALL") or KY_DEFAULT)
    if path.is_file():
        return path
    reason = (
        f"the ky {KY_VERSION} package is not at {path}: run `mkdir -p {path.parent} && "
        f"npm pack ky@{KY_VERSION} --pack-destination {path.parent}`, as .ci/run does"
    )
    if os.environ.get("NEO_REQUIRE_INSPECTOR"):
        pytest.fail(f"{reason} (NEO_REQUIRE_INSPECTOR is set: it must be here)")
    pytest.skip(reason)
