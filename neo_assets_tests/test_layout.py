"""The package's shape (issue 22): no import circle, Dagster only where the orchestrator
is wired, and a pure core. Read from the source with ``ast``, so a new module is checked
the day it lands."""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "neo_assets"
# Where Dagster may be imported: its definitions, and the CLI's one way of launching runs.
DAGSTER_HOMES = ("neo_assets.defs", "neo_assets.definitions", "neo_assets.cli.launch")
# What the pure core may import from the package: itself (and the capabilities' rules, pure too).
CORE = "neo_assets.core"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Nodes under ``if TYPE_CHECKING:``: imports a type checker reads and Python never runs."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return skipped


def _imports_of(module: str, source: str, *, is_package: bool, top_level_only: bool) -> set[str]:
    """Modules ``module`` (whose text is ``source``) imports: ``from x import y`` is ``x.y``
    when that is a module of the package, else ``x`` (a package's ``__init__`` runs for any
    of its modules, so it is not counted as the importer's own dependency). Imports inside
    functions count (they run on the call); ``if TYPE_CHECKING:`` ones do not.
    ``top_level_only``: only imports run at import time."""
    tree = ast.parse(source)
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    skipped = _type_checking_only(tree)
    found: set[str] = set()
    for node in nodes:
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source_module = _resolve(module, node, is_package)
            for alias in node.names:
                submodule = f"{source_module}.{alias.name}"
                found.add(submodule if submodule in MODULES else source_module)
    return found


def _imports(path: Path, *, top_level_only: bool) -> set[str]:
    return _imports_of(
        _module_name(path),
        path.read_text(encoding="utf-8"),
        is_package=path.name == "__init__.py",
        top_level_only=top_level_only,
    )


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _graph() -> dict[str, set[str]]:
    """Who imports whom in the package, wherever the import stands (a module's body or a
    function's): an import moved into a function still makes a circle."""
    return {
        name: {dep for dep in _imports(path, top_level_only=False) if dep in MODULES} - {name}
        for name, path in MODULES.items()
    }


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_checks_see_the_package() -> None:
    assert len(MODULES) > 100 and "neo_assets.sweep.run" in MODULES
    assert "neo_assets.sweep.rules.summary" in _graph()["neo_assets.sweep.census"]
    # The cycle finder finds one when there is one.
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_an_import_inside_a_function_counts_and_a_type_checking_one_does_not() -> None:
    planted = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from neo_assets.store.ledger import Ledger\n"
        "def f():\n"
        "    from neo_assets.sweep.due import evaluate\n"
        "    return evaluate\n"
    )
    # Planted in the module the due check imports its scheduling helpers from.
    planted_in = "neo_assets.sweep.repo_state"
    found = _imports_of(planted_in, planted, is_package=False, top_level_only=False)
    assert "neo_assets.sweep.due" in found
    assert "neo_assets.store.ledger" not in found
    # A circle closed only by a function's import is a circle.
    graph = _graph()
    graph[planted_in] = graph[planted_in] | found
    assert "neo_assets.sweep.due" in (_cycle(graph) or [])


def test_no_import_circle() -> None:
    assert _cycle(_graph()) is None


@pytest.mark.parametrize("name", sorted(MODULES))
def test_dagster_is_imported_only_where_runs_are_wired(name: str) -> None:
    # A capability's own ``defs.py`` is where its Dagster objects live (DESIGN's shape).
    if name.startswith(DAGSTER_HOMES) or name.endswith(".defs"):
        return
    dagster = {
        m for m in _imports(MODULES[name], top_level_only=False) if m.split(".")[0] == "dagster"
    }
    assert not dagster, f"{name} imports {sorted(dagster)}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith(CORE)))
def test_the_core_imports_only_the_core(name: str) -> None:
    # The core is pure: it imports itself and the capabilities' (pure) rules only.
    outside = {
        m
        for m in _imports(MODULES[name], top_level_only=False)
        if m.startswith("neo_assets")
        and not m.startswith(CORE)
        and not _is_capability_rules(m)  # pure too (checked below)
        and m != "neo_assets"
    }
    assert not outside, f"{name} imports {sorted(outside)}"


# A capability's rules (``neo_assets/<capability>/rules.py``) are pure like the core: they
# import the core, other capabilities' rules, and no module that does I/O.
# A capability's rules are ``neo_assets/<capability>/rules.py`` or a ``rules`` package.
def _is_capability_rules(name: str) -> bool:
    parts = name.split(".")
    return len(parts) >= 3 and parts[2] == "rules" and not name.startswith(CORE)


CAPABILITY_RULES = sorted(n for n in MODULES if _is_capability_rules(n))
IMPURE = {"os", "subprocess", "socket", "sqlalchemy", "httpx", "anyio", "asyncio", "time", "re2"}


def test_the_checks_see_the_capability_rules() -> None:
    assert {"neo_assets.code_tools.rules", "neo_assets.quality.rules"} <= set(CAPABILITY_RULES)
    assert "neo_assets.secrets.rules" in CAPABILITY_RULES
    assert {"neo_assets.reconcile.rules.orphans", "neo_assets.health.rules.freeze"} <= set(
        CAPABILITY_RULES
    )


def _impure(imported: set[str]) -> set[str]:
    """What a pure module may not import: the package outside the core and the rules, and
    the standard library's and the dependencies' I/O."""
    outside = {
        m
        for m in imported
        if m.startswith("neo_assets")
        and not m.startswith(CORE)
        and not _is_capability_rules(m)
        and m != "neo_assets"
    }
    return outside | {m for m in imported if m.split(".")[0] in IMPURE}


@pytest.mark.parametrize("name", CAPABILITY_RULES)
def test_a_capabilitys_rules_are_pure(name: str) -> None:
    found = _impure(_imports(MODULES[name], top_level_only=False))
    assert not found, f"{name} imports {sorted(found)}"


def test_an_impure_rules_module_is_found() -> None:
    planted = (
        "import re\n"
        "from neo_assets.core import codes\n"
        "from neo_assets.quality.rules import question_set\n"
        "def f():\n"
        "    import subprocess\n"
        "    from neo_assets.store.ledger import Ledger\n"
    )
    name = "neo_assets.links.rules.planted"
    assert _is_capability_rules(name) and _is_capability_rules("neo_assets.links.rules")
    imported = _imports_of(name, planted, is_package=False, top_level_only=False)
    assert _impure(imported) == {"subprocess", "neo_assets.store.ledger"}


# A module named in a docstring or comment (``links.rules.due``, ``neo_assets.x.y``,
# ``sweep/run.py``) must exist: a moved module's old name misleads the reader.
_DOTTED = re.compile(r"(?<![\w.])((?:neo_assets|core|reconcile|health)(?:\.[a-z_]\w*)+)")
# Every folder of the package (a capability, or a shared one) may begin such a path.
_FOLDERS = "|".join(sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()))
_PATHS = re.compile(rf"(?<![\w./])((?:neo_assets/)?(?:{_FOLDERS})/[\w/]+\.py)")


def _named_modules(text: str) -> set[str]:
    found = {m.group(1) for m in _DOTTED.finditer(text)}
    found |= {
        m.group(1).removeprefix("neo_assets/").removesuffix(".py").replace("/", ".")
        for m in _PATHS.finditer(text)
    }
    return {n if n.startswith("neo_assets.") else f"neo_assets.{n}" for n in found}


def _names_a_module(name: str) -> bool:
    """``links.rules.due.rule`` names module ``links.rules.due`` (its attribute ``rule`` is
    not checked); after a package, the next part must be its module or a name its
    ``__init__`` defines."""
    parts = name.split(".")
    for i in range(len(parts), 1, -1):
        prefix = ".".join(parts[:i])
        if prefix in MODULES:
            path = MODULES[prefix]
            if i == len(parts) or path.name != "__init__.py":
                return True
            return re.search(rf"\b{re.escape(parts[i])}\b", path.read_text()) is not None
    return False


def test_the_modules_named_in_comments_exist() -> None:
    stale = sorted(
        f"{module}: {named}"
        for module, path in MODULES.items()
        for named in _named_modules(path.read_text())
        if not _names_a_module(named)
    )
    assert not stale, "\n".join(stale)


def test_a_stale_module_name_is_found() -> None:
    planted = (
        "The rule is ``core.links_due``; see sweep/gone.py, neo_assets.links.rules.due; "
        "``reconcile.rules.gone`` and health/rules/gone.py, not reconcile.rules.orphans."
    )
    assert {n for n in _named_modules(planted) if not _names_a_module(n)} == {
        "neo_assets.core.links_due",
        "neo_assets.sweep.gone",
        "neo_assets.reconcile.rules.gone",
        "neo_assets.health.rules.gone",
    }


# Issue 34's size rule: a module a reader can hold (no hub) and a function that fits a screen.
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def _oversized(source: str) -> list[str]:
    """Why ``source`` breaks the size rule: its length, and each function over the limit."""
    found = []
    lines = source.count("\n") + (0 if source.endswith("\n") else 1)
    if lines > MAX_MODULE_LINES:
        found.append(f"{lines} lines (at most {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
            if length > MAX_FUNCTION_LINES:
                found.append(f"{node.name}() {length} lines (at most {MAX_FUNCTION_LINES})")
    return found


def test_no_module_over_500_lines_and_no_function_over_80() -> None:
    # Migrations are history, kept as written.
    problems = {
        name: found
        for name, path in MODULES.items()
        if ".migrations." not in name and (found := _oversized(path.read_text()))
    }
    assert not problems, problems


def test_an_oversized_module_and_function_are_found() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    assert _oversized(f"def long():\n{body}") == [
        f"long() {MAX_FUNCTION_LINES + 1} lines (at most {MAX_FUNCTION_LINES})"
    ]
    assert _oversized("x = 1\n" * (MAX_MODULE_LINES + 1)) == [
        f"{MAX_MODULE_LINES + 1} lines (at most {MAX_MODULE_LINES})"
    ]
    assert _oversized("def short():\n    return 1\n") == []
