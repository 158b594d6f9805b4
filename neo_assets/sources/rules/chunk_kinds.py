"""The ``kind`` a chunk can carry, per parser family (one home: the parsers stamp them,
the search filter offers them)."""

KIND_MODULE = "module"
KIND_CLASS = "class"  # class, struct, interface, trait, impl, enum, union, module (Ruby)
KIND_TYPE = "type"  # a type alias or a type declaration without members
KIND_FUNCTION = "function"
KIND_METHOD = "method"
KIND_CLASS_CONFIG = "class-config"  # a JavaScript class's ``static config = {...}``
KIND_SECTION = "section"  # a docs section by heading
KIND_KEY = "key"  # a data file's top-level key (JSON, YAML, TOML)
KIND_RULE = "rule"  # a stylesheet rule block
KIND_TEXT = "text"  # a line window

CODE_UNIT_KINDS = frozenset({KIND_CLASS, KIND_TYPE, KIND_FUNCTION, KIND_METHOD, KIND_CLASS_CONFIG})
# Parser 1.x (neo-code) and 2.x.
CHUNK_KINDS_V1 = frozenset(
    {KIND_MODULE, KIND_CLASS, KIND_FUNCTION, KIND_METHOD, KIND_SECTION, KIND_TEXT}
)
CHUNK_KINDS_V2 = frozenset(
    {KIND_MODULE, KIND_SECTION, KIND_KEY, KIND_RULE, KIND_TEXT, *CODE_UNIT_KINDS}
)
ALL_CHUNK_KINDS = tuple(sorted(CHUNK_KINDS_V1 | CHUNK_KINDS_V2))
