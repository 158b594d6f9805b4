"""The search filters as CLI options: one ``--<name>`` per ``query.rules.filters``
declaration, so a filter added there is an option here with no edit."""

import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from neo_assets.query.rules.filters import FILTERS, QueryFilter


def _help(f: QueryFilter) -> str:
    shown = f.description.rstrip(".")
    if f.values:
        return f"{shown}: {', '.join(f.values)}"
    return f"{shown}, e.g. {f.example!r}" if f.example else shown


def with_filter_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` takes ``**filters``; its CLI gains one option per search filter."""
    signature = inspect.signature(command)
    kept = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    options = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[str | None, typer.Option(help=_help(f))],
        )
        for f in FILTERS
    ]
    command.__signature__ = signature.replace(parameters=[*kept, *options])  # type: ignore[attr-defined]
    return command
