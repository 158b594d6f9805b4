"""Rule blocks of a stylesheet (CSS, SCSS, Less): a top-level ``selector { ... }`` or
``@media ... { ... }`` with its comment directly above, named by its prelude. Pure."""

NAME_CHARS = 200

RuleSpan = tuple[str, int, int]  # (name, first line, last line), 0-based inclusive


def css_rule_spans(text: str, *, line_comments: bool) -> list[RuleSpan]:
    spans: list[RuleSpan] = []
    n = len(text)
    i = 0
    line = 0
    depth = 0
    parens = 0
    stmt_start: int | None = None  # line where the current top-level statement began
    prelude_start: int | None = None  # offset of the first non-comment character
    block_start_line = 0
    name = ""
    blank_run = False
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            if depth == 0 and prelude_start is None:
                # a blank line between a comment and the rule detaches the comment
                j = i + 1
                while j < n and text[j] in " \t\r":
                    j += 1
                if j < n and text[j] == "\n":
                    stmt_start = None
                    blank_run = True
            i += 1
            continue
        if c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            end = n if j < 0 else j + 2
            if depth == 0 and stmt_start is None:
                stmt_start = line
            line += text.count("\n", i, end)
            i = end
            continue
        if line_comments and c == "/" and text.startswith("//", i) and parens == 0:
            j = text.find("\n", i)
            if depth == 0 and stmt_start is None:
                stmt_start = line
            i = n if j < 0 else j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            line += text.count("\n", i, min(j + 1, n))
            i = j + 1
            continue
        if c.isspace():
            i += 1
            continue
        if depth == 0 and prelude_start is None:
            prelude_start = i
            if stmt_start is None:
                stmt_start = line
        blank_run = False
        if c == "(":
            parens += 1
        elif c == ")":
            parens = max(0, parens - 1)
        elif c == "{":
            if depth == 0:
                prelude = text[prelude_start if prelude_start is not None else i : i]
                name = " ".join(prelude.split())[:NAME_CHARS] or "{}"
                block_start_line = stmt_start if stmt_start is not None else line
            depth += 1
        elif c == "}":
            depth = max(0, depth - 1)
            if depth == 0:
                spans.append((name, block_start_line, line))
                stmt_start = prelude_start = None
        elif c == ";" and depth == 0:
            stmt_start = prelude_start = None
        i += 1
    del blank_run
    return spans
