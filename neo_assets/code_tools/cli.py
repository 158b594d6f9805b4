"""The code tools on the command line: ``neo-assets find-symbol``, ``find-references``,
``grep``, ``read-file``, ``list-files``, for one declared tenant, with the same arguments,
rules and JSON answers as ``POST /v1/<tool>`` and the MCP tools. Registered by
``neo_assets/cli/app.py`` (``register(app)``)."""

from collections.abc import Callable
from typing import Annotated, Any

import typer

from neo_assets.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    JsonOpt,
    UsageError,
    emit,
    err,
    load_config,
    run,
)

TenantOpt = Annotated[str, typer.Option(help="the tenant whose repos are read")]
RepoOpt = Annotated[str | None, typer.Option(help="only this repo slug")]


def call_tool(tenant: str, tool: str, body: dict[str, Any], as_json: bool) -> dict[str, Any] | int:
    """The tool's answer for ``tenant`` (every declared repo readable), or EXIT_FAILED
    after saying why (the service's problem: no index yet); a bad argument is a usage
    error (exit 2)."""
    from neo_assets.code_tools.service import CodeTools
    from neo_assets.query.rules.request import QueryInputError
    from neo_assets.query.search import QueryService
    from neo_assets.query.serving import Resident
    from neo_assets.services.handles import open_ledger

    settings, tenants = load_config()
    if tenants.tenant(tenant) is None:
        raise UsageError(f"no tenant {tenant!r} in {tenants.path}; name one that is declared")
    with open_ledger(settings) as ledger:
        # The tools read the ledger and the repos only: no store is opened.
        resident = Resident(settings, None, ledger)  # type: ignore[arg-type]
        tools = CodeTools(QueryService(resident), settings.serve.grep_timeout_s)
        try:
            return tools.call(tool, tenant, [], {k: v for k, v in body.items() if v is not None})
        except QueryInputError as exc:
            if exc.status >= 500:
                err.print(f"[red]error:[/red] {exc.message}", markup=True, highlight=False)
                if as_json:
                    emit({"error": exc.message, "code": exc.code}, True)
                return EXIT_FAILED
            raise UsageError(exc.message) from None


def _command(
    tool: str, tenant: str, body: dict[str, Any], as_json: bool, show: Callable[[dict], None]
) -> None:
    def go() -> int:
        doc = call_tool(tenant, tool, body, as_json)
        if isinstance(doc, int):
            return doc
        emit(doc, as_json)
        if not as_json:
            show(doc)
        return EXIT_OK

    run(go, as_json)


def _say(text: str) -> None:
    err.print(text, highlight=False, markup=False)  # paths and code, printed as they are


def _line(hit: dict[str, Any]) -> str:
    unit = hit.get("unit")
    where = f"  [{unit['kind']} {unit['name']}]" if unit else ""
    return f"{hit['repo']}:{hit['path']}:{hit['line']}: {hit['text'].strip()}{where}"


def register(app: typer.Typer) -> None:
    """Add the code tools' commands to ``app``, in the order ``--help`` lists them."""
    register_symbol_commands(app)
    register_file_commands(app)


def register_symbol_commands(app: typer.Typer) -> None:
    """``find-symbol`` and ``find-references``: the code's names."""

    @app.command("find-symbol")
    def find_symbol(
        name: Annotated[str, typer.Argument(help="a name, a dotted name or a prefix")],
        tenant: TenantOpt,
        repo: RepoOpt = None,
        kind: Annotated[str | None, typer.Option(help="only this kind of unit")] = None,
        language: Annotated[str | None, typer.Option(help="only this language")] = None,
        max_results: Annotated[int | None, typer.Option(help="at most this many")] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Where a function, method, class or type is defined."""
        body = dict(name=name, repo=repo, kind=kind, language=language, max_results=max_results)

        def show(doc: dict) -> None:
            for s in doc["symbols"]:
                _say(
                    f"{s['repo']}:{s['path']}:{s['startLine']}-{s['endLine']} {s['kind']} "
                    f"{s['name']} ({s['match']})  {s.get('signature', '').strip()}"
                )

        _command("find_symbol", tenant, body, as_json, show)

    @app.command("find-references")
    def find_references(
        name: Annotated[str, typer.Argument(help="the identifier")],
        tenant: TenantOpt,
        repo: RepoOpt = None,
        max_results: Annotated[int | None, typer.Option(help="at most this many")] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """The lines that use an identifier, with the unit holding each."""
        body = {"name": name, "repo": repo, "max_results": max_results}

        def show(doc: dict) -> None:
            for r in doc["references"]:
                _say(_line(r))

        _command("find_references", tenant, body, as_json, show)


def register_file_commands(app: typer.Typer) -> None:
    """``grep``, ``read-file`` and ``list-files``: the files' text at the indexed revision."""

    @app.command("grep")
    def grep(
        pattern: Annotated[str, typer.Argument(help="a regular expression (RE2)")],
        tenant: TenantOpt,
        repo: RepoOpt = None,
        path: Annotated[str | None, typer.Option(help="only paths matching this glob")] = None,
        ignore_case: Annotated[bool, typer.Option("-i", "--ignore-case")] = False,
        max_results: Annotated[int | None, typer.Option(help="at most this many")] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Lines matching a regular expression, at the indexed revision."""
        body = {
            "pattern": pattern,
            "repo": repo,
            "path": path,
            "case_sensitive": not ignore_case,
            "max_results": max_results,
        }

        def show(doc: dict) -> None:
            for m in doc["matches"]:
                _say(_line(m))
            if doc["truncated"]:
                _say(f"(cut: {doc['truncatedBy']})")

        _command("grep", tenant, body, as_json, show)

    @app.command("read-file")
    def read_file(
        repo: Annotated[str, typer.Argument(help="the repo slug")],
        path: Annotated[str, typer.Argument(help="the file's path in the repo")],
        tenant: TenantOpt,
        start_line: Annotated[int | None, typer.Option(help="first line (1-based)")] = None,
        end_line: Annotated[int | None, typer.Option(help="last line (inclusive)")] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Lines of a file at its indexed revision."""
        body = {"repo": repo, "path": path, "start_line": start_line, "end_line": end_line}

        def show(doc: dict) -> None:
            for number, text in enumerate(doc["text"].split("\n"), start=doc["startLine"]):
                _say(f"{number:6d} │ {text}")

        _command("read_file", tenant, body, as_json, show)

    @app.command("list-files")
    def list_files(
        repo: Annotated[str, typer.Argument(help="the repo slug")],
        tenant: TenantOpt,
        path_glob: Annotated[str | None, typer.Option(help="only paths matching this")] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """The files of a repo at its indexed revision."""

        def show(doc: dict) -> None:
            for f in doc["files"]:
                _say(f"{f['path']}  {f['language']}  {f['size']} B  {f['lines']} lines")

        _command("list_files", tenant, {"repo": repo, "path_glob": path_glob}, as_json, show)
