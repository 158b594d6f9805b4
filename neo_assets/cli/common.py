"""What every `neo-assets` command shares: the stderr console, exit codes, the usage
error, the one-JSON-document rule and reading the configuration.

``--json`` prints exactly one JSON document on stdout; everything human (tables,
progress, errors) goes to stderr. Exit codes follow CONTRACT.md: 0 fine, 1 a repo
failed (or the canary is unhealthy), 2 a usage or configuration error.
"""

import json
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.console import Console

from neo_assets.core import codes

err = Console(stderr=True, soft_wrap=True)  # a log or a pipe gets whole lines (paths)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

# Every command's --json flag.
JsonOpt = Annotated[bool, typer.Option("--json", help="one JSON document on stdout")]


class UsageError(Exception):
    """A user-caused problem: the message names the thing and the fix (exit 2)."""


def emit(doc: dict[str, Any], as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(doc, sort_keys=True, default=str) + "\n")
        sys.stdout.flush()


def load_settings_or_usage(**overrides: object):  # noqa: ANN201 - Settings
    from neo_assets.config.settings import SettingsError, load_settings

    try:
        return load_settings(**overrides)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None


def load_config():  # noqa: ANN201 - (settings, tenants)
    """The settings and the declaration in force (declaration/in_force.py). What the
    file gets wrong is told on stderr, one warning per problem: a misdeclared tenant or
    repo keeps its last good declaration, and the others run as usual. Only a file that
    gives no tenant, with no last good declaration to stand in, is a usage error."""
    from neo_assets.declaration.in_force import load_declaration, warning_lines
    from neo_assets.tenants.validation import TenantsConfigError

    settings = load_settings_or_usage()
    try:
        tenants = load_declaration(settings)
    except TenantsConfigError as exc:
        raise UsageError(str(exc)) from None
    for line in warning_lines(tenants):
        err.print(f"[yellow]warning:[/yellow] {line}", markup=True, highlight=False, soft_wrap=True)
    return settings, tenants


def run(fn: Callable[[], int], as_json: bool) -> None:
    """Run a command's body; a usage error is one red line (and a JSON error document)."""
    from neo_assets.services.handles import StoreUnreachable

    try:
        code = fn()
    except (UsageError, StoreUnreachable) as exc:  # unreachable: nothing was written
        usage = isinstance(exc, UsageError)
        failure = codes.CONFIG_INVALID if usage else codes.STORE_FAILED
        err.print(f"[red]error:[/red] {exc}", markup=True, highlight=False)
        if as_json:
            emit({"error": str(exc), "code": failure}, True)
        raise typer.Exit(EXIT_USAGE if usage else EXIT_FAILED) from None
    raise typer.Exit(code)
