"""The code languages parser 2.x reads with tree-sitter, one entry each: file endings,
grammar package, and node types by role. Pure data. A new language is one entry here and
its grammar package in pyproject.toml. Design: docs/design/sources.md#parser-2x"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Grammar:
    package: str  # the pip name
    module: str  # the import name
    function: str  # the module's function returning the language pointer


@dataclass(frozen=True)
class LanguageSpec:
    suffixes: tuple[str, ...]  # the file name endings read as this language
    grammar: Grammar  # the tree-sitter grammar package it is parsed with
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

CODE_LANGUAGES: dict[str, LanguageSpec] = {
    "javascript": LanguageSpec(
        (".js", ".mjs", ".cjs", ".jsx"),
        Grammar("tree-sitter-javascript", "tree_sitter_javascript", "language"),
        **_JS_COMMON,
    ),
    "typescript": LanguageSpec(
        (".ts", ".mts", ".cts"),
        Grammar("tree-sitter-typescript", "tree_sitter_typescript", "language_typescript"),
        **_JS_COMMON,
    ),
    "tsx": LanguageSpec(
        (".tsx",),
        Grammar("tree-sitter-typescript", "tree_sitter_typescript", "language_tsx"),
        **_JS_COMMON,
    ),
    "go": LanguageSpec(
        (".go",),
        Grammar("tree-sitter-go", "tree_sitter_go", "language"),
        functions=_f("function_declaration"),
        methods=_f("method_declaration"),
    ),
    "rust": LanguageSpec(
        (".rs",),
        Grammar("tree-sitter-rust", "tree_sitter_rust", "language"),
        classes=_f("struct_item", "enum_item", "union_item", "trait_item", "impl_item"),
        types=_f("type_item"),
        functions=_f("function_item"),
        namespaces=_f("mod_item"),
        attached=_f("line_comment", "block_comment", "attribute_item"),
        bodies=_f("declaration_list", "field_declaration_list", "enum_variant_list"),
    ),
    "java": LanguageSpec(
        (".java",),
        Grammar("tree-sitter-java", "tree_sitter_java", "language"),
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
        (".cs",),
        Grammar("tree-sitter-c-sharp", "tree_sitter_c_sharp", "language"),
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
        (".c", ".h"),
        Grammar("tree-sitter-c", "tree_sitter_c", "language"),
        classes=_f("struct_specifier", "union_specifier", "enum_specifier"),
        functions=_f("function_definition"),
        namespaces=_C_PREPROC | _f("linkage_specification"),
        bodies=_f("field_declaration_list", "enumerator_list"),
    ),
    "cpp": LanguageSpec(
        (".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++", ".ipp"),
        Grammar("tree-sitter-cpp", "tree_sitter_cpp", "language"),
        classes=_f("class_specifier", "struct_specifier", "union_specifier", "enum_specifier"),
        functions=_f("function_definition"),
        namespaces=_C_PREPROC | _f("namespace_definition", "linkage_specification"),
        wrappers=_f("template_declaration"),
        bodies=_f("field_declaration_list", "enumerator_list"),
    ),
    "ruby": LanguageSpec(
        (".rb", ".rake", ".gemspec"),
        Grammar("tree-sitter-ruby", "tree_sitter_ruby", "language"),
        classes=_f("class", "module"),
        functions=_f("method"),
        methods=_f("singleton_method"),
        namespaces=_f("singleton_class"),
        bodies=_f("body_statement"),
    ),
    "php": LanguageSpec(
        (".php",),
        Grammar("tree-sitter-php", "tree_sitter_php", "language_php"),
        classes=_f(
            "class_declaration", "interface_declaration", "trait_declaration", "enum_declaration"
        ),
        functions=_f("function_definition"),
        methods=_f("method_declaration"),
        namespaces=_f("namespace_definition"),
        bodies=_f("declaration_list", "enum_declaration_list"),
    ),
    "bash": LanguageSpec(
        (".sh", ".bash", ".zsh"),
        Grammar("tree-sitter-bash", "tree_sitter_bash", "language"),
        functions=_f("function_definition"),
    ),
}
