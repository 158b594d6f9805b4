"""How a unit's name is read in each tree-sitter language: small name readers over
tree-sitter nodes, and the language table (``SPECS``, kept in
sources/rules/code_languages.py: endings, grammar, node types by role). The walk that uses
them is code_units.py."""

from tree_sitter import Node

from neo_assets.sources.rules.code_languages import CODE_LANGUAGES as SPECS  # noqa: F401
from neo_assets.sources.rules.code_languages import LanguageSpec, _f  # noqa: F401 (re-exported)

# Values of a JS/TS declaration or assignment that make it a function / class / object.
JS_FUNCTION_VALUES = _f("arrow_function", "function_expression", "function", "generator_function")
JS_CLASS_VALUES = _f("class")
JS_FIELD_TYPES = _f("field_definition", "public_field_definition")


def text_of(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return " ".join(node.text.decode("utf-8", errors="replace").split())


def field_name(node: Node) -> str:
    """The ``name`` field's text, or "" when there is none."""
    return text_of(node.child_by_field_name("name"))


def go_receiver_type(node: Node) -> str:
    """The receiver's type name of a Go method: ``func (c *Command[T]) X()`` -> Command."""
    receiver = node.child_by_field_name("receiver")
    if receiver is None:
        return ""
    stack = [receiver]
    while stack:
        current = stack.pop(0)
        if current.type == "type_identifier":
            return text_of(current)
        stack.extend(current.named_children)
    return ""


def rust_type_name(node: Node | None) -> str:
    """A Rust type's base name: ``Foo<T>`` -> Foo, ``crate::a::Foo`` -> Foo, ``&Foo``
    -> Foo."""
    while node is not None and node.type in ("generic_type", "reference_type", "pointer_type"):
        inner = node.child_by_field_name("type")
        node = inner if inner is not None else (node.named_children or [None])[-1]
    if node is None:
        return ""
    if node.type == "scoped_type_identifier":
        return text_of(node.child_by_field_name("name"))
    return text_of(node)


_C_DECLARATOR_WRAPPERS = frozenset(
    {
        "pointer_declarator",
        "reference_declarator",
        "function_declarator",
        "parenthesized_declarator",
        "attributed_declarator",
    }
)


def c_function_name(node: Node) -> list[str]:
    """The name of a C/C++ function definition as path segments: ``void A::B::f()`` ->
    ["A", "B", "f"], ``int main()`` -> ["main"]; [] when it has none."""
    current = node.child_by_field_name("declarator")
    while current is not None and current.type in _C_DECLARATOR_WRAPPERS:
        inner = current.child_by_field_name("declarator")
        if inner is None:
            named = [c for c in current.named_children if c.type != "type_qualifier"]
            inner = named[0] if named else None
        current = inner
    if current is None:
        return []
    name = text_of(current).replace(" ", "")
    if current.type == "qualified_identifier":
        return [p for p in name.split("::") if p]
    return [name] if name else []
