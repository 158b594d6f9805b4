"""The search filters' one declaration: the request parser, the MCP schema, the CLI and
the served-row predicate all read ``FILTERS``."""

import pytest

from neo_assets.query.rules.filters import FILTER_NAMES, FILTERS, facet_values, kept
from neo_assets.query.rules.request import FIELDS, QueryInputError, parse_search


def test_every_filter_is_a_request_field_and_parsed() -> None:
    assert set(FILTER_NAMES) <= set(FIELDS)
    body = {"query": "q"} | {f.name: f.example or f.values[0] for f in FILTERS}
    assert parse_search(body).filters == {f.name: body[f.name] for f in FILTERS}


def test_a_value_outside_a_closed_set_is_refused_naming_the_values() -> None:
    with pytest.raises(QueryInputError) as got:
        parse_search({"query": "q", "language": "pyhton"})
    assert got.value.field == "language"
    assert "'pyhton' is not one of" in got.value.message and "python" in got.value.message


def test_a_glob_that_narrows_nothing_is_refused() -> None:
    with pytest.raises(QueryInputError, match="matches every path"):
        parse_search({"query": "q", "path": "**/*"})


def test_a_row_is_kept_by_every_filter_it_passes() -> None:
    row = facet_values({"sourcePath": "src/app.py", "language": "python", "kind": "function"})
    assert kept(row, {})
    assert kept(row, {"path": "src/*.py", "language": "python", "kind": "function"})
    assert not kept(row, {"path": "tests/*"})
    assert not kept(row, {"language": "go"})
    assert not kept(facet_values({}), {"kind": "function"})  # an unstamped row has no kind


def test_the_mcp_schema_and_the_cli_options_come_from_the_declaration() -> None:
    from neo_assets.cli.app import query
    from neo_assets.serve.query_specs import SEARCH_TOOLS

    spec = SEARCH_TOOLS["search_code"]
    for f in FILTERS:
        arg = spec.arg(f.name)
        assert arg is not None and arg.description == f.description
        assert arg.enum == (f.values or None)
    import inspect

    assert set(FILTER_NAMES) <= set(inspect.signature(query).parameters)


def test_the_unit_filter_globs_the_qualified_name() -> None:
    method = facet_values({"qualifiedName": "Ky.retry", "kind": "method"})
    assert kept(method, {"unit": "Ky.*"}) and kept(method, {"unit": "*.retry"})
    assert not kept(method, {"unit": "Other.*"})
    assert parse_search({"query": "q", "unit": "Ky.*"}).filters == {"unit": "Ky.*"}
