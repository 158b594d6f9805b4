"""When the whole tenants file is not valid YAML: its 'tenants' list split item by item,
so a YAML problem inside one tenant's block stays in that block."""

import re
from dataclasses import dataclass

from neo_assets.tenants.problems import ConfigProblem
from neo_assets.tenants.yaml_marks import parse_yaml

_TENANTS_KEY_LINE = re.compile(r"tenants:[ \t]*(?:#.*)?")
_ITEM_ID_LINE = re.compile(
    r"(?:-[ \t]+)?id:[ \t]*(['\"]?)([a-z0-9][a-z0-9-]{0,62})\1[ \t]*(?:#.*)?"
)


@dataclass(frozen=True, slots=True)
class SplitBlock:
    """One item of the top-level 'tenants' list, parsed on its own: its index, first
    line, the item (when it parses) or its YAML problem, and the id its text names."""

    index: int
    line: int
    parsed: bool
    item: object
    problem: "ConfigProblem | None"
    named: str | None


def _blank_except(lines: list[str], keep: range, header: int) -> str:
    """The text with every line outside ``keep`` (and the 'tenants:' line) blanked, so
    a part parses alone and keeps its line numbers."""
    kept = [line if index in keep else "" for index, line in enumerate(lines)]
    kept[header] = "tenants:"
    return "\n".join(kept)


def split_tenant_blocks(text: str) -> list[SplitBlock] | None:
    """When the whole file is not valid YAML: its 'tenants' list item by item, so a YAML
    problem inside one tenant's block stays in that block. None when the problem is not
    confined to list items (the list cannot be found, is written in flow style, or the
    text around it does not parse): the file as a whole is then unusable."""
    lines = text.split("\n")
    header = next(
        (i for i, line in enumerate(lines) if _TENANTS_KEY_LINE.fullmatch(line.rstrip("\r"))),
        None,
    )
    if header is None:
        return None
    starts: list[int] = []
    indent: int | None = None
    end = len(lines)
    for index in range(header + 1, len(lines)):
        line = lines[index].rstrip("\r")
        body = line.lstrip(" ")
        if not body or body.startswith("#"):
            continue
        column = len(line) - len(body)
        is_item = body.startswith("- ") or body == "-"
        if indent is None:
            if not is_item:
                return None
            indent = column
        if column < indent or (column == 0 and not is_item):
            end = index
            break
        if column == indent and is_item:
            starts.append(index)
    if not starts:
        return None
    spans = list(zip(starts, [*starts[1:], end], strict=True))
    around = "\n".join("" if starts[0] <= i < end else line for i, line in enumerate(lines))
    ok, _ = parse_yaml(around, lambda *_: None)
    if not ok:
        return None
    blocks: list[SplitBlock] = []
    for index, (first, stop) in enumerate(spans):
        found: list[ConfigProblem] = []
        ok, data = parse_yaml(
            _blank_except(lines, range(first, stop), header),
            lambda message, line, found=found, at=f"tenants[{index}]": found.append(
                ConfigProblem(at, message, line)
            ),
        )
        item = data.get("tenants", [None])[0] if ok and isinstance(data, dict) else None
        named = None
        for raw in lines[first:stop]:
            body = raw.rstrip("\r").lstrip(" ")
            column = len(raw) - len(raw.lstrip(" "))
            if column in (indent, (indent or 0) + 2) and (match := _ITEM_ID_LINE.fullmatch(body)):
                named = match.group(2)
                break
        problem = found[0] if found else None
        if problem is not None and (problem.line is None or problem.line > stop):
            # Reading on past the block (an unclosed bracket or quote): name the block.
            problem = ConfigProblem(
                problem.location,
                f"{problem.message} (the YAML of this tenant's block, lines {first + 1}-"
                f"{stop}, is not closed)",
                first + 1,
            )
        blocks.append(SplitBlock(index, first + 1, ok, item, problem, named))
    if all(block.parsed for block in blocks):
        return None  # the problem is elsewhere: not confined to one block
    return blocks
