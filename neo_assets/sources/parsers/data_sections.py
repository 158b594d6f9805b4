"""Data files by top-level key and stylesheets by rule block (parser 2.x), from the
spans sources/rules/data_keys.py and css_blocks.py find. Lines no key or rule covers
(a stylesheet's ``@import`` lines, comments between rules) are the ``module`` unit."""

from collections.abc import Sequence

from neo_assets.sources.parsers.units import Unit
from neo_assets.sources.rules.chunk_kinds import KIND_KEY, KIND_MODULE, KIND_RULE
from neo_assets.sources.rules.css_blocks import css_rule_spans
from neo_assets.sources.rules.data_keys import json_key_spans, toml_key_spans, yaml_key_spans


def data_units(
    language: str, source_path: str, text: str, lines: Sequence[str]
) -> list[Unit] | None:
    """Key units (None: no top-level mapping, window the file)."""
    if language == "json":
        spans = json_key_spans(text)
    elif language == "yaml":
        spans = yaml_key_spans(lines)
    else:
        spans = toml_key_spans(lines)
    if spans is None:
        return None
    units = [Unit(KIND_KEY, name, tuple(range(a + 1, b + 2))) for name, a, b in spans]
    return _with_remainder(source_path, units, len(lines))


def style_units(language: str, source_path: str, text: str, lines: Sequence[str]) -> list[Unit]:
    spans = css_rule_spans(text, line_comments=language != "css")
    units = [Unit(KIND_RULE, name, tuple(range(a + 1, b + 2))) for name, a, b in spans]
    return _with_remainder(source_path, units, len(lines))


def _with_remainder(source_path: str, units: list[Unit], n_lines: int) -> list[Unit]:
    covered = {n for u in units for n in u.line_numbers}
    rest = tuple(n for n in range(1, n_lines + 1) if n not in covered)
    return [Unit(KIND_MODULE, source_path, rest), *units] if rest else units
