"""Code units through tree-sitter: a file's classes, functions and methods, and the module
remainder, as line sets (parser 2.x). A tree whose errors cover too much
(sources/rules/syntax_errors.py) yields no units: the caller windows the file.
Design: docs/design/sources.md#parser-2x"""

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from tree_sitter import Node, Parser

from neo_assets.sources.parsers.code_languages import (
    JS_CLASS_VALUES,
    JS_FIELD_TYPES,
    JS_FUNCTION_VALUES,
    SPECS,
    LanguageSpec,
    c_function_name,
    field_name,
    go_receiver_type,
    rust_type_name,
    text_of,
)
from neo_assets.sources.parsers.grammars import GrammarUnavailable, language_for
from neo_assets.sources.parsers.units import Unit, is_blank
from neo_assets.sources.rules.chunk_kinds import (
    KIND_CLASS,
    KIND_CLASS_CONFIG,
    KIND_FUNCTION,
    KIND_METHOD,
    KIND_MODULE,
    KIND_TYPE,
)
from neo_assets.sources.rules.syntax_errors import (
    REASON_GRAMMAR_UNUSABLE,
    REASON_TOO_DEEP,
    syntax_fallback_reason,
)

MAX_NESTING = 64  # classes/namespaces deeper than this are left to their container

_JS = frozenset({"javascript", "typescript", "tsx"})
_C = frozenset({"c", "cpp"})


@dataclass(frozen=True)
class CodeUnits:
    units: list[Unit]  # the module unit first, then the units in source order
    namespace: str  # the file's declared package/namespace ("" when none)
    fallback_reason: str | None  # set: units is empty, chunk the file by windows


@dataclass(frozen=True)
class _Role:
    kind: str  # "class", "type", "function", "method", "namespace", "object", "config"
    name: str
    bodies: tuple[Node, ...] = ()  # containers whose named children are members
    member_scope: str | None = None  # the name members are qualified by (impl -> Type)
    owner: str | None = None  # explicit owner: Go receiver, C++ A::f


def code_units(language: str, source_path: str, text: str, lines: Sequence[str]) -> CodeUnits:
    """The units of ``text`` (split into ``lines``) in ``language`` (a SPECS key)."""
    try:
        grammar = language_for(language)
    except GrammarUnavailable:
        return CodeUnits([], "", REASON_GRAMMAR_UNUSABLE)
    data = text.encode("utf-8", errors="surrogatepass")
    tree = Parser(grammar).parse(data)
    walk = _Walk(SPECS[language], language, lines)
    root = tree.root_node
    if root.has_error:
        non_blank = {i for i, line in enumerate(lines, start=1) if not is_blank(line)}
        reason = syntax_fallback_reason(walk.error_spans(root), non_blank)
        if reason is not None:
            return CodeUnits([], "", reason)
    try:
        taken = walk.scan(root.named_children, (), None, 0)
    except RecursionError:
        return CodeUnits([], "", REASON_TOO_DEEP)
    module_lines = tuple(n for n in range(1, len(lines) + 1) if n not in taken)
    module = Unit(KIND_MODULE, source_path, module_lines)
    return CodeUnits([module, *walk.units], walk.namespace, None)


class _Walk:
    def __init__(self, spec: LanguageSpec, language: str, lines: Sequence[str]) -> None:
        self.spec = spec
        self.language = language
        self.units: list[Unit] = []
        self.namespace = ""
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line.encode("utf-8", errors="surrogatepass")))
        self.starts = starts

    # ------------------------------------------------------------------ lines

    def first(self, node: Node) -> int:
        return bisect_right(self.starts, node.start_byte)

    def last(self, node: Node) -> int:
        return bisect_right(self.starts, max(node.start_byte, node.end_byte - 1))

    def error_spans(self, root: Node) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        stack = [root]
        while stack:
            node = stack.pop()
            if node.type == "ERROR" or node.is_missing:
                spans.append((self.first(node), self.last(node)))
                continue
            stack.extend(c for c in node.children if c.has_error)
        return spans

    def attach_start(self, siblings: Sequence[Node], i: int) -> int:
        """The first line of siblings[i] with the comments/decorators right above it."""
        start = self.first(siblings[i])
        j = i - 1
        while j >= 0 and siblings[j].type in self.spec.attached:
            if self.last(siblings[j]) < start - 1:
                break  # a blank line between
            if j > 0 and self.first(siblings[j]) <= self.last(siblings[j - 1]):
                break  # a trailing comment of the statement before
            start = self.first(siblings[j])
            j -= 1
        return start

    # ------------------------------------------------------------------ walk

    def scan(
        self, siblings: Sequence[Node], scope: tuple[str, ...], owner: str | None, depth: int
    ) -> set[int]:
        """Find the units among ``siblings``; return the lines they take."""
        taken: set[int] = set()
        if depth > MAX_NESTING:
            return taken
        for i, node in enumerate(siblings):
            if node.type in self.spec.attached:
                continue
            if owner is not None and node.type in self.spec.bodies:
                taken |= self.scan(node.named_children, scope, owner, depth + 1)
                continue
            declaration = self.unwrap(node)
            if declaration is None:
                continue
            role = self.role(declaration, owner)
            if role is None:
                continue
            span = range(self.attach_start(siblings, i), self.last(node) + 1)
            taken |= self.emit(role, span, scope, owner, depth)
        return taken

    def unwrap(self, node: Node) -> Node | None:
        while node.type in self.spec.wrappers:
            inner = node.child_by_field_name("declaration")
            if inner is None:
                candidates = [
                    c
                    for c in node.named_children
                    if c.type not in self.spec.attached and c.type != "template_parameter_list"
                ]
                inner = candidates[-1] if candidates else None
            if inner is None:
                return None
            node = inner
        return node

    def emit(
        self,
        role: _Role,
        span: range,
        scope: tuple[str, ...],
        owner: str | None,
        depth: int,
    ) -> set[int]:
        base = owner if owner is not None else ".".join(scope)
        qual = f"{base}.{role.name}" if base and role.name else (role.name or base)
        if role.kind == "namespace":
            inner_scope = (*scope, role.name) if role.name else scope
            inner_owner = None if role.name else owner
            taken: set[int] = set()
            for body in role.bodies:
                taken |= self.scan(body.named_children, inner_scope, inner_owner, depth + 1)
            return taken
        if role.kind == "object":
            taken = set()
            for body in role.bodies:
                taken |= self.scan_object(body, qual)
            return taken
        lines = set(span)
        if role.kind == "class":
            index = len(self.units)
            member_qual = qual
            if role.member_scope:
                member_qual = f"{base}.{role.member_scope}" if base else role.member_scope
            carved: set[int] = set()
            for body in role.bodies:
                carved |= self.scan(body.named_children, scope, member_qual, depth + 1)
            own = tuple(sorted(lines - carved))
            self.units.insert(index, Unit(KIND_CLASS, qual, own, owner))
            return lines
        if role.kind == "type":
            self.units.append(Unit(KIND_TYPE, qual, tuple(span), owner))
            return lines
        if role.kind == "config":
            name = f"{owner}.{role.name}" if owner else qual
            self.units.append(Unit(KIND_CLASS_CONFIG, name, tuple(span), owner))
            return lines
        if role.kind == "method" or (role.kind == "function" and owner is not None):
            parent = owner
            if role.owner is not None:
                parent = ".".join([*scope, role.owner])
            name = f"{parent}.{role.name}" if parent else qual
            self.units.append(Unit(KIND_METHOD, name, tuple(span), parent))
            return lines
        self.units.append(Unit(KIND_FUNCTION, qual, tuple(span), None))
        return lines

    def scan_object(self, obj: Node, owner: str) -> set[int]:
        """Methods of a JS object literal: ``m() {}``, ``m: function () {}``, ``m: () =>``."""
        taken: set[int] = set()
        members = obj.named_children
        for i, node in enumerate(members):
            name = ""
            if node.type == "method_definition":
                name = field_name(node)
            elif node.type == "pair":
                value = node.child_by_field_name("value")
                if value is not None and value.type in JS_FUNCTION_VALUES:
                    name = text_of(node.child_by_field_name("key")).strip("'\"")
            if not name:
                continue
            span = range(self.attach_start(members, i), self.last(node) + 1)
            self.units.append(Unit(KIND_METHOD, f"{owner}.{name}", tuple(span), owner))
            taken |= set(span)
        return taken

    # ------------------------------------------------------------------ roles

    def role(self, node: Node, owner: str | None) -> _Role | None:
        spec, t, lang = self.spec, node.type, self.language
        if t in ("package_clause", "package_declaration") and owner is None:
            names = [c for c in node.named_children if "identifier" in c.type]
            self.namespace = text_of(names[0]) if names else self.namespace
            return None
        if lang in _JS:
            special = self.js_role(node, owner)
            if special is not None:
                return special
        if lang == "go":
            return self.go_role(node)
        if lang in _C:
            return self.c_role(node, owner)
        if t in spec.namespaces:
            return self.namespace_role(node)
        if t == "impl_item":
            type_name = rust_type_name(node.child_by_field_name("type"))
            trait = rust_type_name(node.child_by_field_name("trait"))
            name = f"impl {trait} for {type_name}" if trait else f"impl {type_name}"
            return _Role("class", name, self.bodies(node), member_scope=type_name)
        if t in spec.classes:
            name = field_name(node).replace("::", ".") or "(anonymous)"
            return _Role("class", name, self.bodies(node))
        if t in spec.types:
            return _Role("type", field_name(node) or "(anonymous)")
        if t in spec.functions or (owner is not None and t in spec.methods):
            name = field_name(node) or "default"
            if t == "singleton_method" and owner is None:
                name = f"{text_of(node.child_by_field_name('object'))}.{name}"
            return _Role("function", name)
        if t in spec.methods and t == "singleton_method":  # def obj.name outside a class
            obj = text_of(node.child_by_field_name("object"))
            return _Role("function", f"{obj}.{field_name(node)}")
        return None

    def bodies(self, node: Node) -> tuple[Node, ...]:
        body = node.child_by_field_name("body")
        return (body,) if body is not None else ()

    def namespace_role(self, node: Node) -> _Role | None:
        t = node.type
        if t in ("singleton_class",):
            return _Role("namespace", "", self.bodies(node) or (node,))
        if t.startswith("preproc_"):
            return _Role("namespace", "", (node,))
        name = field_name(node).replace("::", ".").replace("\\", ".")
        body = node.child_by_field_name("body")
        if t == "file_scoped_namespace_declaration":
            self.namespace = name
            return _Role("namespace", "", (node,))
        if body is None:
            if self.language == "php" and name:
                self.namespace = name  # namespace A; applies to the rest of the file
            return None
        if self.language == "php" and name and not self.namespace:
            self.namespace = name
        return _Role("namespace", name, (body,))

    def js_role(self, node: Node, owner: str | None) -> _Role | None:
        t = node.type
        if t == "expression_statement" and node.named_children:
            inner = node.named_children[0]
            if inner.type in self.spec.namespaces:
                return self.namespace_role(inner)
            if inner.type == "assignment_expression":
                return self.js_value_role(
                    text_of(inner.child_by_field_name("left")).replace(" ", ""),
                    inner.child_by_field_name("right"),
                )
            if inner.type == "call_expression":
                return self.js_assign_role(inner)
            return None
        if t in ("lexical_declaration", "variable_declaration"):
            declarators = [c for c in node.named_children if c.type == "variable_declarator"]
            if len(declarators) != 1:
                return None
            return self.js_value_role(
                field_name(declarators[0]), declarators[0].child_by_field_name("value")
            )
        if owner is None:
            if t == "export_statement":
                value = node.child_by_field_name("value")
                if value is not None:
                    return self.js_value_role("default", value)
            return None
        # class members
        is_static = any(c.type == "static" for c in node.children)
        if t == "method_definition":
            name = field_name(node)
            is_getter = any(c.type == "get" for c in node.children)
            if is_static and is_getter and name == "config":
                return _Role("config", name)
            return _Role("function", name)
        if t in JS_FIELD_TYPES:
            name_node = node.child_by_field_name("name") or node.child_by_field_name("property")
            name = text_of(name_node)
            if is_static and name == "config":
                return _Role("config", name)
            value = node.child_by_field_name("value")
            if value is not None and value.type in JS_FUNCTION_VALUES:
                return _Role("function", name)
        return None

    def js_assign_role(self, call: Node) -> _Role | None:
        """``Object.assign(Target, {...})``: the object's methods are Target's."""
        if text_of(call.child_by_field_name("function")).replace(" ", "") != "Object.assign":
            return None
        arguments = call.child_by_field_name("arguments")
        args = arguments.named_children if arguments is not None else []
        objects = tuple(a for a in args[1:] if a.type == "object")
        if not args or not objects or args[0].type not in ("identifier", "member_expression"):
            return None
        return _Role("object", text_of(args[0]).replace(" ", ""), objects)

    def js_value_role(self, name: str, value: Node | None) -> _Role | None:
        if value is None or not name:
            return None
        if value.type in JS_FUNCTION_VALUES:
            return _Role("function", name)
        if value.type in JS_CLASS_VALUES:
            return _Role("class", name, self.bodies(value))
        if value.type == "object":
            return _Role("object", name, (value,))
        return None

    def go_role(self, node: Node) -> _Role | None:
        t = node.type
        if t == "function_declaration":
            return _Role("function", field_name(node))
        if t == "method_declaration":
            return _Role("method", field_name(node), owner=go_receiver_type(node) or None)
        if t == "type_declaration":
            specs = [c for c in node.named_children if c.type in ("type_spec", "type_alias")]
            if len(specs) == 1:
                return self.go_role(specs[0])
            return _Role("namespace", "", (node,)) if specs else None
        if t in ("type_spec", "type_alias"):
            value = node.child_by_field_name("type")
            kind = (
                "class"
                if value is not None and value.type in ("struct_type", "interface_type")
                else "type"
            )
            return _Role(kind, field_name(node))
        return None

    def c_role(self, node: Node, owner: str | None) -> _Role | None:
        t = node.type
        spec = self.spec
        if t == "function_definition":
            segments = c_function_name(node)
            if not segments:
                return None
            if len(segments) > 1 and owner is None:
                return _Role("method", segments[-1], owner=".".join(segments[:-1]))
            return _Role("function", segments[-1])
        if t in spec.namespaces:
            if t in ("linkage_specification",):
                return _Role("namespace", "", self.bodies(node))
            return self.namespace_role(node)
        if t in spec.classes:
            body = node.child_by_field_name("body")
            if body is None:
                return None
            return _Role("class", field_name(node) or "(anonymous)", (body,))
        if t in ("type_definition", "declaration", "field_declaration"):
            specifier = node.child_by_field_name("type")
            if specifier is None or specifier.type not in spec.classes:
                return None
            body = specifier.child_by_field_name("body")
            if body is None:
                return None
            name = field_name(specifier)
            if not name:
                declarator = node.child_by_field_name("declarator")
                name = text_of(declarator) or "(anonymous)"
            return _Role("class", name, (body,))
        return None
