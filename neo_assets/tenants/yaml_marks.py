"""tenants.yaml as YAML: a strict safe loader (duplicate keys are an error) whose
mappings and sequences remember the line of each key and item, for messages."""

from collections.abc import Callable, Iterator
from typing import Any

import yaml

from neo_assets.tenants.problems import short_repr


class MarkedDict(dict[Any, Any]):
    """A YAML mapping that remembers the line of each key, for messages."""

    line: int | None = None
    key_lines: dict[Any, int]


class MarkedList(list[Any]):
    line: int | None = None
    item_lines: list[int]


_YamlLoaderBase: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_YamlLoaderBase):  # type: ignore[misc]
    """Safe loading, plus: duplicate keys are an error (YAML would silently keep the
    last one), and mappings/sequences carry their line numbers."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(
                key_node, yaml.ScalarNode
            ):
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in first_seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {short_repr(key)} (first at line {first_seen[key]})",
                    key_node.start_mark,
                )
            first_seen[key] = line
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


def _construct_marked_map(
    loader: _StrictLoader, node: yaml.MappingNode
) -> Iterator[dict[Any, Any]]:
    data = MarkedDict()
    data.line = node.start_mark.line + 1
    data.key_lines = {}
    yield data
    data.update(loader.construct_mapping(node))
    # node.value is flattened (merge keys expanded) by now; later keys win, as in dict.
    for key_node, _ in node.value:
        try:
            data.key_lines[loader.construct_object(key_node)] = key_node.start_mark.line + 1
        except TypeError:
            continue


def _construct_marked_seq(loader: _StrictLoader, node: yaml.SequenceNode) -> Iterator[list[Any]]:
    data = MarkedList()
    data.line = node.start_mark.line + 1
    data.item_lines = [item.start_mark.line + 1 for item in node.value]
    yield data
    data.extend(loader.construct_sequence(node))


_StrictLoader.add_constructor("tag:yaml.org,2002:map", _construct_marked_map)
_StrictLoader.add_constructor("tag:yaml.org,2002:seq", _construct_marked_seq)


def key_line(mapping: object, key: object) -> int | None:
    lines = getattr(mapping, "key_lines", None)
    if lines is not None:
        try:
            if key in lines:
                return int(lines[key])
        except TypeError:
            pass
    return getattr(mapping, "line", None)


def item_line(sequence: object, index: int) -> int | None:
    lines = getattr(sequence, "item_lines", None)
    if lines is not None and index < len(lines):
        return int(lines[index])
    return getattr(sequence, "line", None)


def parse_yaml(text: str, add: Callable[[str, int | None], None]) -> tuple[bool, object]:
    try:
        return True, yaml.load(text, Loader=_StrictLoader)  # _StrictLoader is a safe loader
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        problem = error.problem or "unparseable"
        context = f" ({error.context})" if error.context else ""
        if mark is None:
            add(f"invalid YAML: {problem}{context}; found no position; allowed: valid YAML", None)
            return False, None
        source_lines = text.splitlines()
        found = "the end of the file"
        if 0 <= mark.line < len(source_lines):
            found = f"the line {short_repr(source_lines[mark.line])}"
        add(
            f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: "
            f"{problem}{context}; found {found}; allowed: valid YAML (a mapping with a "
            "'tenants' list)",
            mark.line + 1,
        )
    except yaml.YAMLError as error:
        add(f"invalid YAML; found {short_repr(str(error))}; allowed: valid YAML", None)
    except RecursionError:
        add("invalid YAML; found nesting too deep to read; allowed: the tenants schema", None)
    return False, None
