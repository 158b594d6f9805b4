"""JavaScript sources the tests sweep: a module of members, each under a JSDoc a blank line
above its function (koa's and express's style), whose module row holds every comment."""

from collections.abc import Callable, Sequence


def jsdoc_members(count: int, doc: Callable[[int], Sequence[str]], *, owner: str, last: str) -> str:
    """``count`` members ``{owner}.member{i}``, member i under the JSDoc lines ``doc(i)``
    and one blank line; ``last`` ends the file."""
    out = ["'use strict'", ""]
    for i in range(count):
        out += [
            "/**",
            *(" * " + line.format(i=i) for line in doc),
            " */",
            "",
            f"{owner}.member{i} = function member{i} (value) {{",
            f"  return value + {i}",
            "}",
            "",
        ]
    return "\n".join(out) + last
