"""Moving a real-world-shaped repository from parser 1.0.0 to 2.0.0, end to end.

A git repo of JavaScript, TypeScript, Go (and a README) is swept under 1.0.0 through
``run_sweeps`` (real Dagster runs, real Chroma, the fault-injecting OpenAI-compatible
server as the provider), then declared 2.0.0. The first 2.0.0 sweep delivers part of the
new generation (one unit's request hangs past the call ceiling); reconciliation with
``NEO_RECONCILIATION_ENABLED=true`` reclaims the 1.0.0 rows of the paths whose 2.0.0 set
is complete and keeps the others, the no-hole check passing at every step; the next
sweep completes 2.0.0 and reconciliation then reclaims the rest. The bump needs nothing
of its own: 2.0.0 re-identifies every chunk, and the existing reconciliation does the
rest. Every claim is read back from Chroma and the ledger.
"""

import asyncio
from typing import Any

import pytest

from neo_assets.config.settings import load_settings
from neo_assets.core.codes import KIND_SUPERSEDED_GENERATION, KIND_SUPERSEDED_PENDING
from neo_assets.query.one_shot import run_query
from neo_assets_tests.fakes.fault_server import marker
from neo_assets_tests.fakes.supervisor import FaultServerSupervisor

# The reconciliation arm's world (real repos, tenants file, Dagster instance) and its
# fixtures: the same machinery, a different repository.
from neo_assets_tests.reconcile.test_reconciliation import (  # noqa: F401 - fixtures
    PARSER,
    check,
    make_world,
    off_declaration,
    server,
    server_module,
)
from neo_assets_tests.sweep_harness import sweep_env_vars

OLD, NEW = "1.0.0", "2.0.0"

FILES = {
    "src/collection/Base.mjs": """import Observable from '../core/Observable.mjs';

/**
 * A sortable, filterable collection of items.
 */
class Base extends Observable {
    static config = {
        className: 'Neo.collection.Base',
        sorters: []
    }

    /**
     * Sorts the items by the configured sorters.
     */
    doSort(items) {
        return items.slice().sort((a, b) => a.id - b.id);
    }

    filter(fn) {
        return this.items.filter(fn);
    }
}

export default Base;
""",
    "src/util/Array.mjs": """const ArrayUtil = {
    add(arr, items) {
        arr.push(...items);
        return arr;
    },
    remove(arr, item) {
        const i = arr.indexOf(item);
        if (i > -1) arr.splice(i, 1);
        return arr;
    }
};

export default ArrayUtil;
""",
    "source/core/Ky.ts": """import type {Options} from '../types/options.js';

export class Ky {
    protected _options: Options;

    constructor(input: string, options: Options = {}) {
        this._options = options;
    }

    // Retries the request after a delay.
    protected async _retry<T>(fn: () => Promise<T>): Promise<T> {
        return fn();
    }
}

export type Hooks = {beforeRequest: Array<() => void>};
""",
    "command.go": f"""package cobra

import "fmt"

// Command is just that, a command for your application.
type Command struct {{
\tUse   string
\tShort string
}}

// Execute uses the args and runs through the command tree.
func (c *Command) Execute() error {{
\tfmt.Println(c.Use)
\treturn nil
}}

// Slow is a method whose request hangs: {marker("hang")}
func (c *Command) Slow() {{}}
""",
    "README.md": "# Project\n\n## Install\n\nnpm i\n\n## Use\n\nCall it.\n",
}


def _by_path(rows: dict[str, dict[str, Any]], version: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for rid, md in rows.items():
        if md["parserVersion"] == version:
            out.setdefault(md["sourcePath"], set()).add(rid)
    return out


def _no_hole(world: Any, declared: dict[str, set[str]], old: dict[str, set[str]]) -> None:
    """Every yielded path holds a complete set: its declared 2.0.0 ids, or its 1.0.0 rows
    exactly as they were."""
    rows = set(world.rows("acme", "web"))
    for path in FILES:
        assert declared[path] <= rows or old[path] <= rows, path


def test_a_repo_moves_from_1_0_0_to_2_0_0_with_no_hole(
    make_world: Any,  # noqa: F811 - the fixture imported above
    server: FaultServerSupervisor,  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in sweep_env_vars(server).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("NEO_EMBEDDING_CONTEXT_TOKENS", "2000")  # whole units fit the band
    monkeypatch.setenv("NEO_EMBEDDING_RECOVERY_MAX_WAIT_S", "0.3")
    monkeypatch.setenv("NEO_RECONCILIATION_ENABLED", "true")
    # The switch's mechanics path by path; with the quality gate on (the default) the old
    # parser's rows serve until the new one is evaluated (quality/test_parser_gate_e2e.py).
    monkeypatch.setenv("NEO_QUALITY_GATE", "false")
    world = make_world({"web": FILES})

    # --- 1. Swept under 1.0.0: windows for JS/TS/Go, sections for the README.
    server.configure(hang_s=0)
    world.declare({"acme": [world.entry("web", version=OLD)]})
    assert world.sweep() == {("acme", "web"): "complete"}
    old_rows = world.rows("acme", "web")
    assert {md["parserVersion"] for md in old_rows.values()} == {OLD}
    old = _by_path(old_rows, OLD)
    assert set(old) == set(FILES)
    assert {md["kind"] for rid, md in old_rows.items() if md["sourcePath"] == "command.go"} == {
        "text"
    }

    # --- 2. Declared 2.0.0: the new generation is declared at once; one unit's request
    # hangs past the call ceiling, so its path's 2.0.0 set stays incomplete.
    world.declare({"acme": [world.entry("web", version=NEW)]})
    server.configure(hang_s=4)
    assert world.sweep() == {("acme", "web"): "deferred"}
    server.configure(hang_s=0)
    generation = world.ledger.declared_generation("acme", "web")
    assert generation is not None and generation["parser_version"] == NEW
    declared = world.declared("acme", "web")
    assert set(declared) == set(FILES)
    assert not set().union(*declared.values()) & set(old_rows)  # every chunk re-identified
    rows = world.rows("acme", "web")
    complete = {p for p, ids in declared.items() if ids <= set(rows)}
    assert "command.go" not in complete and complete  # partial: some paths, not all
    _no_hole(world, declared, old)

    plan = world.plan("acme")
    reclaimable = {rid for p in complete for rid in old[p]}
    waiting = old["command.go"]
    assert set(plan.ids_by_kind[KIND_SUPERSEDED_GENERATION]) == reclaimable
    assert set(plan.ids_by_kind[KIND_SUPERSEDED_PENDING]) == waiting
    report = world.reconcile("acme")
    assert report["success"] and report["reclaimed"] == len(reclaimable)
    assert check(report, "no_hole")["passed"]
    rows = world.rows("acme", "web")
    assert waiting <= set(rows) and not reclaimable & set(rows)
    _no_hole(world, declared, old)

    # --- 3. The provider delivers the rest: 2.0.0 complete, then the last 1.0.0 rows go.
    assert world.sweep(force=True) == {("acme", "web"): "complete"}
    _no_hole(world, declared, old)
    report = world.reconcile("acme")
    assert report["success"] and report["reclaimed"] == len(waiting)
    assert all(c["passed"] for c in report["checks"].values()), report["checks"]
    rows = world.rows("acme", "web")
    assert off_declaration(rows, (PARSER, NEW)) == set()
    assert set(rows) == set().union(*declared.values())  # each path: exactly its 2.0.0 set

    # The rows are code units with their metadata.
    by_name = {md["name"]: md for md in rows.values()}
    execute = by_name["Command.Execute"]
    assert (execute["kind"], execute["language"], execute["parent"]) == ("method", "go", "Command")
    assert execute["qualifiedName"] == "cobra.Command.Execute"
    assert FILES["command.go"].splitlines()[execute["startLine"] - 1].startswith("// Execute")
    assert by_name["Base.doSort"]["language"] == "javascript"
    assert by_name["Ky._retry"]["language"] == "typescript"
    assert by_name["Ky._retry"]["parent"] == "Ky"

    # A tenant-scoped query reads 2.0.0 rows only, with their metadata.
    settings = load_settings()
    answer = asyncio.run(
        run_query(settings, world.store, world.ledger, "doSort", tenant="acme", repo="web", k=20)
    )
    hits = answer["results"]
    assert hits and {h["metadata"]["parserVersion"] for h in hits} == {NEW}
    assert all("startLine" in h["metadata"] for h in hits)
