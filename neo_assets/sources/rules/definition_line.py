"""The line that names a code unit (its signature line), found in the unit's text: what a
self-evaluation hit must hold, and which part of a unit stored as parts answers for it."""

# A line starting so is a comment, a doc comment or a decorator/attribute, not the signature.
_NOT_SIGNATURE = ("@", "#", "//", "/*", "*")


def definition_line(unit: str, text: str) -> str | None:
    """The first line of ``text`` (stripped) outside comments that holds the last dotted
    part of the unit's name ``unit`` (``Flask.run`` -> ``run``); None when no line does."""
    leaf = unit.split(".")[-1]
    if not leaf:
        return None
    for line in text.splitlines():
        line = line.strip()
        if line and leaf in line and not line.startswith(_NOT_SIGNATURE):
            return line
    return None
