"""What a code unit is in each tree-sitter language: node types by role and how a
unit's name is read. Tables and small name readers over tree-sitter nodes; the walk
that uses them is code_units.py.

Roles: ``classes`` (units with members: class, struct, interface, trait, impl, enum;
kind ``class``), ``types`` (type aliases; kind ``type``), ``functions`` (kind
``function`` at top level or in a namespace, ``method`` inside a class), ``methods``
(member types that are methods only inside a class body), ``namespaces`` (containers
whose members are units of their own but which are no unit: C++/C# namespaces, Rust
``mod``, TS ``namespace``, preprocessor conditionals), ``wrappers`` (a node around one
declaration whose span it adds: ``export``, ``template<...>``), ``attached`` (comments,
decorators and attributes that belong to the unit right after them) and ``bodies``
(the member lists of a class).
"""

from dataclasses import dataclass, field

from tree_sitter import Node


@dataclass(frozen=True)
class LanguageSpec:
    classes: frozenset[str] = frozenset()
    types: frozenset[str] = frozenset()
    functions: frozenset[str] = frozenset()
    methods: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()
    wrappers: frozenset[str] = frozenset()
    attached: frozenset[str] = frozenset({"comment"})
    bodies: frozenset[str] = frozenset()
    extra: dict[str, str] = field(default_factory=dict)


def _f(*names: str) -> frozenset[str]:
    return frozenset(names)


_JS_COMMON = dict(
    classes=_f(
        "class_declaration",
        "abstract_class_declaration",
        "interface_declaration",
        "enum_declaration",
    ),
    types=_f("type_alias_declaration"),
    functions=_f("function_declaration", "generator_function_declaration"),
    methods=_f("method_definition"),
    namespaces=_f("internal_module", "module"),
    wrappers=_f("export_statement", "ambient_declaration"),
    attached=_f("comment", "decorator"),
    bodies=_f("class_body", "interface_body", "object_type"),
)
_C_PREPROC = _f("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef")

SPECS: dict[str, LanguageSpec] = {
    "javascript": LanguageSpec(**_JS_COMMON),
    "typescript": LanguageSpec(**_JS_COMMON),
    "tsx": LanguageSpec(**_JS_COMMON),
    "go": LanguageSpec(
        functions=_f("function_declaration"),
        methods=_f("method_declaration"),
    ),
    "rust": LanguageSpec(
        classes=_f("struct_item", "enum_item", "union_item", "trait_item", "impl_item"),
        types=_f("type_item"),
        functions=_f("function_item"),
        namespaces=_f("mod_item"),
        attached=_f("line_comment", "block_comment", "attribute_item"),
        bodies=_f("declaration_list", "field_declaration_list", "enum_variant_list"),
    ),
    "java": LanguageSpec(
        classes=_f(
            "class_declaration",
            "interface_declaration",
            "enum_declaration",
            "record_declaration",
            "annotation_type_declaration",
        ),
        methods=_f(
            "method_declaration", "constructor_declaration", "compact_constructor_declaration"
        ),
        attached=_f("line_comment", "block_comment"),
        bodies=_f(
            "class_body",
            "interface_body",
            "enum_body",
            "enum_body_declarations",
            "annotation_type_body",
        ),
    ),
    "csharp": LanguageSpec(
        classes=_f(
            "class_declaration",
            "struct_declaration",
            "interface_declaration",
            "enum_declaration",
            "record_declaration",
            "record_struct_declaration",
        ),
        methods=_f(
            "method_declaration",
            "constructor_declaration",
            "destructor_declaration",
            "operator_declaration",
            "conversion_operator_declaration",
        ),
        namespaces=_f("namespace_declaration", "file_scoped_namespace_declaration"),
        attached=_f("comment"),
        bodies=_f("declaration_list", "enum_member_declaration_list"),
    ),
    "c": LanguageSpec(
        classes=_f("struct_specifier", "union_specifier", "enum_specifier"),
        functions=_f("function_definition"),
        namespaces=_C_PREPROC | _f("linkage_specification"),
        bodies=_f("field_declaration_list", "enumerator_list"),
    ),
    "cpp": LanguageSpec(
        classes=_f("class_specifier", "struct_specifier", "union_specifier", "enum_specifier"),
        functions=_f("function_definition"),
        namespaces=_C_PREPROC | _f("namespace_definition", "linkage_specification"),
        wrappers=_f("template_declaration"),
        bodies=_f("field_declaration_list", "enumerator_list"),
    ),
    "ruby": LanguageSpec(
        classes=_f("class", "module"),
        functions=_f("method"),
        methods=_f("singleton_method"),
        namespaces=_f("singleton_class"),
        bodies=_f("body_statement"),
    ),
    "php": LanguageSpec(
        classes=_f(
            "class_declaration", "interface_declaration", "trait_declaration", "enum_declaration"
        ),
        functions=_f("function_definition"),
        methods=_f("method_declaration"),
        namespaces=_f("namespace_definition"),
        bodies=_f("declaration_list", "enum_declaration_list"),
    ),
    "bash": LanguageSpec(functions=_f("function_definition")),
}

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


def c_specifier_body(node: Node) -> Node | None:
    """The member list of a struct/union/enum/class specifier: None for a reference
    (``struct S *p``)."""
    return node.child_by_field_name("body")
