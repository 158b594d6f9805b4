"""The code tools over one service process: the caller's tenant and readable repos only, at
the revision the repo is indexed at. A file is named only by a path the index holds and
read by its recorded blob (a changed plain file is reported, not served); grep runs RE2
(linear time) under a time budget and a result bound."""

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import re2

from neo_assets.code_tools.index_store import index_head, read_payload
from neo_assets.code_tools.rules import limits, matching, tools
from neo_assets.code_tools.rules.index import RepoIndex, enclosing_unit, line_hit, split_lines
from neo_assets.core import codes
from neo_assets.query.rules.request import QueryInputError
from neo_assets.query.search import QueryService
from neo_assets.secrets.rules import is_prose, redact
from neo_assets.sources.envelope import read_texts
from neo_assets.sources.model import Envelope, FileEntry, SourceError

INDEX_CACHE = 32  # repo indexes kept decoded
TEXT_CACHE_BYTES = 128 * 1024 * 1024  # file texts kept, by blob
RE2_MAX_MEM = 32 * 1024 * 1024  # a pattern whose automaton needs more is refused


def shown(path: str, text: str | None) -> str | None:
    """What the tools may show of a file: every line holding a secret redacted (the
    sweep fences those chunks; a file read or a grep must not serve them either)."""
    return None if text is None else redact(text, path)[0]


def text_key(blob: str, path: str) -> str:
    # Prose and code are scanned by different rules: one blob may show two ways.
    return f"{blob}:{'prose' if is_prose(path) else 'code'}"


def not_indexed(repo: str, revision: str | None) -> QueryInputError:
    at = f" at its indexed revision {revision}" if revision else ""
    return QueryInputError(
        codes.QUERY_NOT_INDEXED,
        f"repo {repo!r} has no code index{at} yet: a sweep builds it (neo-assets sweep "
        f"--repo {repo} --force); search_code answers meanwhile",
        "repo",
        status=503,
    )


def no_file(repo: str, path: str, revision: str) -> QueryInputError:
    return QueryInputError(
        codes.QUERY_NOT_FOUND,
        f"no file {path[:200]!r} in repo {repo!r} at revision {revision}; list_files lists "
        "its paths",
        "path",
        status=404,
    )


class LruCache:
    """Values by key, the least recently used out past a budget that each value's ``size``
    counts against (file texts by blob id: a blob never changes; decoded indexes)."""

    def __init__(self, budget: int, size: Callable[[Any], int] = len) -> None:
        self.budget = budget
        self.size = size
        self.used = 0
        self._values: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            if key in self._values or self.size(value) > self.budget:
                return
            self._values[key] = value
            self.used += self.size(value)
            while self.used > self.budget:
                _old, dropped = self._values.popitem(last=False)
                self.used -= self.size(dropped)


class CodeTools:
    """The tools over a ``QueryService`` (its resident ledger and tenants file)."""

    def __init__(self, service: QueryService, grep_timeout_s: float) -> None:
        self.service = service
        self.grep_timeout_s = grep_timeout_s
        self.texts = LruCache(TEXT_CACHE_BYTES)
        self._indexes = LruCache(INDEX_CACHE, size=lambda _index: 1)

    # ------------------------------------------------------------------ indexes
    def _repo_path(self, tenant_id: str, slug: str) -> str:
        tenant = self.service.resident.tenants().tenant(tenant_id)
        repo = next((r for r in tenant.repos if r.slug == slug), None) if tenant else None
        if repo is None:  # scope() let it through, so it is declared: a race with a reload
            raise not_indexed(slug, None)
        return str(Path(repo.path).resolve())

    def index(self, tenant_id: str, slug: str) -> RepoIndex | None:
        """The repo's index at the revision it is served at, or None (none built yet)."""
        ledger = self.service.resident.ledger
        state = ledger.repo_state(tenant_id, slug) or {}
        revision = state.get("last_ingested_rev")
        if not revision:
            return None
        head = index_head(ledger, tenant_id, slug, revision)
        if head is None:
            return None
        key = (tenant_id, slug, revision, head[0])
        found = self._indexes.get(key)
        if found is not None:
            return found
        payload = read_payload(ledger, tenant_id, slug, revision)
        if payload is None:
            return None
        index = RepoIndex.from_payload(slug, payload)
        self._indexes.put(key, index)
        return index

    def _indexes_for(
        self, tenant_id: str, token_repos: Sequence[str], repo: str | None
    ) -> tuple[list[RepoIndex], list[str]]:
        """The indexes of the repos a request reads (403 for a repo the token may not
        read), and the repos among them without one."""
        found, missing = [], []
        for slug in self.service.scope(tenant_id, token_repos, repo):
            index = self.index(tenant_id, slug)
            if index is None:
                missing.append(slug)
            else:
                found.append(index)
        return found, missing

    def _one_index(self, tenant_id: str, token_repos: Sequence[str], repo: str) -> RepoIndex:
        found, _missing = self._indexes_for(tenant_id, token_repos, repo)
        if not found:
            state = self.service.resident.ledger.repo_state(tenant_id, repo) or {}
            raise not_indexed(repo, state.get("last_ingested_rev"))
        return found[0]

    # ------------------------------------------------------------------ texts
    def _texts(
        self, tenant_id: str, index: RepoIndex, paths: Sequence[str]
    ) -> Iterator[tuple[str, str | None]]:
        """(path, text or None: unreadable now) over ``paths`` of the index, cached texts
        first, the rest read in one pass."""
        wanted = [p for p in paths if self.texts.get(text_key(index.files[p].blob, p)) is None]
        read = self._read(tenant_id, index, wanted) if wanted else {}
        for path in paths:
            cached = self.texts.get(text_key(index.files[path].blob, path))
            yield path, cached if path not in read else read[path]

    def _read(self, tenant_id: str, index: RepoIndex, paths: Sequence[str]) -> dict[str, Any]:
        entries = tuple(
            FileEntry(p, index.files[p].size, index.files[p].blob, True, None, None)
            for p in sorted(paths)
        )
        env = Envelope(
            kind="git" if index.kind == "git" else "dir",
            root=self._repo_path(tenant_id, index.repo),
            revision=index.revision,
            entries=entries,
        )
        out: dict[str, str | None] = {}

        def keep(envelope: Envelope) -> None:
            for path, text in read_texts(envelope, [e.path for e in envelope.entries]):
                out[path] = shown(path, text)
                self.texts.put(text_key(index.files[path].blob, path), out[path])

        try:
            keep(env)
        except SourceError:
            # One unreadable file (a directory changed since its sweep, a pruned blob):
            # read the rest one by one so only that one is missing.
            for e in entries:
                try:
                    if e.path not in out:
                        keep(Envelope(env.kind, env.root, env.revision, (e,)))
                except SourceError:
                    out[e.path] = None
        return out

    # ------------------------------------------------------------------ tools
    def find_symbol(
        self, tenant_id: str, token_repos: Sequence[str], args: dict[str, Any]
    ) -> dict[str, Any]:
        indexes, missing = self._indexes_for(tenant_id, token_repos, args["repo"])
        symbols, truncated = matching.find_symbols(
            indexes,
            args["name"],
            kind=args["kind"],
            language=args["language"],
            limit=args["max_results"],
        )
        return {
            "symbols": symbols,
            "truncated": truncated,
            "revisions": {i.repo: i.revision for i in indexes},
            "notIndexed": missing,
        }

    def find_references(
        self, tenant_id: str, token_repos: Sequence[str], args: dict[str, Any]
    ) -> dict[str, Any]:
        indexes, missing = self._indexes_for(tenant_id, token_repos, args["repo"])
        hits, truncated = matching.find_references(indexes, args["name"], limit=args["max_results"])
        texts: dict[tuple[str, str], list[str] | None] = {}
        for index in indexes:
            paths = sorted({p for i, p, _l, _u in hits if i is index})
            for path, text in self._texts(tenant_id, index, paths):
                texts[(index.repo, path)] = None if text is None else split_lines(text)
        refs = []
        for index, path, line, unit in hits:
            lines = texts.get((index.repo, path))
            text = lines[line - 1] if lines and line <= len(lines) else ""
            refs.append(line_hit(index.repo, path, line, text, unit))
        return {
            "references": refs,
            "truncated": truncated,
            "revisions": {i.repo: i.revision for i in indexes},
            "notIndexed": missing,
        }

    def grep(
        self, tenant_id: str, token_repos: Sequence[str], args: dict[str, Any]
    ) -> dict[str, Any]:
        matcher = compile_pattern(args["pattern"], args["case_sensitive"])
        whole = matching.prefilter_pattern(args["pattern"])
        prefilter = None if whole is None else compile_pattern(whole, args["case_sensitive"])
        indexes, missing = self._indexes_for(tenant_id, token_repos, args["repo"])
        limit, glob = args["max_results"], args["path"]
        deadline = time.monotonic() + self.grep_timeout_s
        matches: list[dict[str, Any]] = []
        truncated_by: str | None = None
        searched = 0
        for index in indexes:
            paths = [p for p in index.files if matching.path_matches(p, glob)]
            for path, text in self._texts(tenant_id, index, paths):
                if time.monotonic() > deadline:
                    truncated_by = "time"
                    break
                searched += 1
                if text is None or (prefilter is not None and prefilter.search(text) is None):
                    continue
                syms = index.symbols.get(path, [])
                for number, line in enumerate(split_lines(text), start=1):
                    if matcher.search(line) is None:
                        continue
                    if len(matches) >= limit:
                        truncated_by = "max_results"
                        break
                    unit = enclosing_unit(syms, number)
                    matches.append(line_hit(index.repo, path, number, line, unit))
                if truncated_by:
                    break
            if truncated_by:
                break
        return {
            "matches": matches,
            "truncated": truncated_by is not None,
            "truncatedBy": truncated_by,
            "filesSearched": searched,
            "revisions": {i.repo: i.revision for i in indexes},
            "notIndexed": missing,
        }

    def read_file(
        self, tenant_id: str, token_repos: Sequence[str], args: dict[str, Any]
    ) -> dict[str, Any]:
        index = self._one_index(tenant_id, token_repos, args["repo"])
        path = args["path"]
        info = index.files.get(path)
        if info is None:
            raise no_file(index.repo, path, index.revision)
        text = dict(self._texts(tenant_id, index, [path]))[path]
        if text is None:
            raise QueryInputError(
                codes.QUERY_NOT_INDEXED,
                f"{path[:200]!r} of repo {index.repo!r} can no longer be read as indexed at "
                f"revision {index.revision} (changed or gone since its sweep); the next "
                "sweep indexes it anew",
                "path",
                status=503,
            )
        lines = split_lines(text)
        first, last, more = matching.line_window(len(lines), args["start_line"], args["end_line"])
        units = [
            s.as_json()
            for s in index.symbols.get(path, [])
            if s.start_line <= last and s.end_line >= first
        ]
        return {
            "repo": index.repo,
            "path": path,
            "revision": index.revision,
            "language": info.language,
            "startLine": first,
            "endLine": last,
            "totalLines": len(lines),
            "truncated": more,
            "text": "\n".join(lines[first - 1 : last]),
            "units": units,
        }

    def list_files(
        self, tenant_id: str, token_repos: Sequence[str], args: dict[str, Any]
    ) -> dict[str, Any]:
        index = self._one_index(tenant_id, token_repos, args["repo"])
        glob = args["path_glob"]
        files = [
            {"path": f.path, "language": f.language, "size": f.size, "lines": f.lines}
            for f in index.files.values()
            if matching.path_matches(f.path, glob)
        ]
        return {
            "repo": index.repo,
            "revision": index.revision,
            "files": files[: limits.MAX_LIST_FILES],
            "truncated": len(files) > limits.MAX_LIST_FILES,
        }

    def call(
        self, tool: str, tenant_id: str, token_repos: Sequence[str], body: Any
    ) -> dict[str, Any]:
        """One tool call: arguments checked (``tools.parse_args``), then answered."""
        args = tools.parse_args(tool, body)
        return getattr(self, tool)(tenant_id, token_repos, args)


def compile_pattern(pattern: str, case_sensitive: bool) -> Any:
    """The RE2 program of ``pattern``, or a 400 naming what RE2 refused."""
    options = re2.Options()
    options.max_mem = RE2_MAX_MEM
    options.case_sensitive = case_sensitive
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise QueryInputError(
            codes.QUERY_INVALID,
            f"pattern: not a regular expression RE2 runs ({str(detail)[:200]}); RE2 has no "
            "backreferences or lookaround, and a pattern's program is bounded in size",
            "pattern",
        ) from None
