"""The bad-input corpus, end to end through `neo-assets sweep --json`.

One healthy tenant (acme/widgets) is swept once; then every malformed input is thrown at
the CLI. Each must give a clear error or a recorded skip with its reason, the contract's
exit code (2 config/usage error, 1 a repo failed, 0 complete/deferred), and lose nothing:
after every input, acme's rows (ids, stamps, documents) are exactly the baseline's.

- tenants.yaml and settings (exit 2, nothing runs: acme's last attempt stays the
  baseline's): run through the CLI; a representative subset as real subprocesses (one JSON
  document on stdout, exit status of the process), the rest through the same Typer app
  in process (a config error exits before any Dagster import, so a process start would
  be all the cost);
- repository contents (symlink loops and escapes, fifo, device, 100 MB sparse file, deep
  nesting, names with newlines or bad bytes, binary, stamp-imitating content), swept by a
  real `sweep` subprocess: exit 0, and the ledger's envelope records each skip's reason;
- broken repositories (corrupt git, a ref that names nothing): exit 1, the failure's code;
- files that vanish or change mid-read: the steps directly, with a churning thread.
"""

import os
import shutil
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from neo_assets.config.settings import load_settings
from neo_assets.core import codes
from neo_assets.services.handles import build_provider
from neo_assets.sources.model import SourceError
from neo_assets.sweep.chunk import chunk_step
from neo_assets.sweep.context import RepoContext
from neo_assets.sweep.envelope import envelope_step
from neo_assets.sweep.run import SweepInputs, run_sweep
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.drills.harness import (
    CliResult,
    child_env,
    open_state,
    release_store,
    run_cli,
)
from neo_assets_tests.drills.invariants import read_rows, snapshot, stamp_problems
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import KbHandles
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

HEALTHY = """\
tenants:
  - id: acme
    repos:
      - slug: widgets
        path: {widgets}
        parser: {{id: neo-code, version: 1.0.0}}
"""
PASSWD_LINE = "root:x:0:0:"  # what an escape to /etc/passwd would leak into a row


@dataclass
class Corpus:
    root: Path
    home: Path
    repos: Path  # the allowed root
    widgets: Path
    tenants: Path
    env: dict[str, str]
    baseline: dict[str, dict[str, Any]] = field(default_factory=dict)
    baseline_attempt: float | None = None
    cases: int = 0

    def healthy_yaml(self) -> str:
        return HEALTHY.format(widgets=self.widgets)

    def write_case(self, name: str, content: str | bytes) -> Path:
        path = self.root / "cases" / f"{name}.yaml"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
        return path

    def assert_nothing_lost(self, *, ran: bool = False) -> None:
        """acme's rows are the baseline's; unless ``ran``, no sweep touched acme at all."""
        state = open_state(self.home)
        rows = read_rows(state.store)
        assert snapshot(rows, "acme") == self.baseline
        if not ran:
            acme = state.ledger.repo_state("acme", "widgets")
            assert acme is not None and acme["last_attempt_at"] == self.baseline_attempt
        release_store()

    def accept_sweep(self) -> None:
        """A case meant to sweep acme did: later cases compare with this attempt."""
        state = open_state(self.home)
        self.baseline_attempt = state.ledger.repo_state("acme", "widgets")["last_attempt_at"]
        release_store()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    root = tmp_path_factory.mktemp("corpus")
    repos = root / "repos"
    widgets = GitRepo(repos / "widgets")
    widgets.write("widgets/core.py", "class Widget:\n    def render(self):\n        return 'w'\n")
    widgets.write("README.md", "# Widgets\n\n## Use\n\nCall render.\n")
    widgets.write("notes.txt", "plain notes\n")
    widgets.commit("initial", when=1_700_000_000)
    tenants = root / "tenants.yaml"
    home = root / "home"
    corpus = Corpus(root, home, repos, widgets.path, tenants, {})
    tenants.write_text(corpus.healthy_yaml())
    corpus.env = child_env(home, {"NEO_TENANTS_FILE": str(tenants)})
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith("NEO_"):
                mp.delenv(name)
        mp.setenv("NEO_HOME", str(home))
        mp.setenv("DAGSTER_HOME", str(home / "dagster"))
        first = run_cli(corpus.env, "sweep", "--force", "--json")
        assert first.code == 0, first.stderr[-3000:]
        (result,) = first.doc()["repos"]
        assert result["outcome"] == codes.OUTCOME_COMPLETE, result
        state = open_state(home)
        corpus.baseline = snapshot(read_rows(state.store), "acme")
        assert len(corpus.baseline) >= 3
        corpus.baseline_attempt = state.ledger.repo_state("acme", "widgets")["last_attempt_at"]
        release_store()
        yield corpus
        release_store()


# ------------------------------------------------------------------ config and usage errors
@dataclass(frozen=True)
class ConfigCase:
    """One malformed tenants file (healthy acme + ``extra``), or a raw file, or a settings
    variable, and the words the error must contain."""

    name: str
    extra: str = ""  # appended under the healthy tenants list
    raw: str | bytes | None = None  # the whole file instead
    env: tuple[tuple[str, str], ...] = ()
    args: tuple[str, ...] = ("sweep", "--force", "--json")
    expect: tuple[str, ...] = ()
    subprocess: bool = False


def _tenant(tid: str, slug: str = "tools", path: str = "{repos}/widgets", more: str = "") -> str:
    return (
        f"  - id: {tid}\n    repos:\n      - slug: {slug}\n        path: {path}\n"
        f"        parser: {{id: neo-code, version: 1.0.0}}\n{more}"
    )


ALLOWED = (("NEO_ALLOWED_ROOTS", '["{repos}"]'),)
CONFIG_CASES = [
    ConfigCase("yaml-unclosed-flow", raw="tenants: [\n", expect=("invalid YAML", "line 2")),
    ConfigCase(
        "yaml-tab-indent",
        raw="tenants:\n\t- id: acme\n",
        expect=("invalid YAML", "line 2"),
        subprocess=True,
    ),
    ConfigCase(
        "yaml-duplicate-key",
        extra="  - id: globex\n    id: initech\n    repos: []\n",
        expect=("duplicate key", "'id'"),
    ),
    ConfigCase("yaml-top-level-list", raw="- id: acme\n", expect=("top level must be a mapping",)),
    ConfigCase("yaml-empty", raw="# nothing\n", expect=("empty",)),
    ConfigCase("not-utf8", raw=b"tenants:\n  - id: \xff\xfe\n", expect=("not valid UTF-8",)),
    ConfigCase(
        "yaml-python-tag",
        raw="tenants: !!python/object/apply:os.system ['touch {root}/pwned']\n",
        expect=("invalid YAML",),
        subprocess=True,
    ),
    ConfigCase(
        "yaml-alias-bomb",
        raw=(
            'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
            + "".join(
                f"{c}: &{c} [{','.join(['*' + p] * 9)}]\n"
                for p, c in zip("abcdefgh", "bcdefghi", strict=True)
            )
            + "tenants: *i\n"
        ),
        expect=("unknown key",),
    ),
    ConfigCase(
        "type-repos-string",
        extra="  - id: globex\n    repos: widgets\n",
        expect=("'repos' must be a list",),
    ),
    ConfigCase(
        "type-cadence-string",
        extra=_tenant("globex", more="        cadence_minutes: often\n"),
        expect=("cadence_minutes", "must be an integer"),
    ),
    ConfigCase(
        "type-version-float",
        extra="  - id: globex\n    repos:\n      - slug: t\n        path: {repos}/widgets\n"
        "        parser: {{id: neo-code, version: 1.0}}\n",
        expect=("'version' must be a string",),
    ),
    ConfigCase(
        "type-id-bool", extra=_tenant("yes"), expect=("tenant id must be a string", "boolean")
    ),
    ConfigCase(
        "unknown-top-key",
        raw="tenant:\n  - id: acme\n",
        expect=("unknown key", "did you mean 'tenants'"),
    ),
    ConfigCase(
        "unknown-repo-key",
        extra=_tenant("globex", more="        branch: main\n"),
        expect=("unknown key in a repo", "branch"),
        subprocess=True,
    ),
    ConfigCase(
        "unknown-parser-key",
        extra="  - id: globex\n    repos:\n      - slug: t\n        path: {repos}/widgets\n"
        "        parser: {{id: neo-code, version: 1.0.0, excludes: [x]}}\n",
        expect=("unknown key in a parser", "excludes"),
    ),
    ConfigCase("id-uppercase", extra=_tenant("Globex"), expect=("uppercase", "perhaps 'globex'")),
    ConfigCase(
        "id-cyrillic-lookalike",
        extra=_tenant("\u0430cme"),  # a Cyrillic 'а': looks exactly like the healthy acme
        expect=("non-ASCII", "U+0430", "CYRILLIC"),
        subprocess=True,
    ),
    ConfigCase(
        "id-fullwidth-digit", extra=_tenant("tenant\uff11"), expect=("U+FF11", "look-alike")
    ),
    ConfigCase("id-zero-width-space", extra=_tenant('"glo\\u200bbex"'), expect=("U+200B",)),
    ConfigCase("id-leading-space", extra=_tenant('" globex"'), expect=("whitespace",)),
    ConfigCase("id-trailing-newline", extra=_tenant('"globex\\n"'), expect=("whitespace",)),
    ConfigCase(
        "id-widens-where-mapping",
        extra=_tenant('{"$ne": "nobody"}'),
        expect=("tenant id must be a string", "mapping"),
        subprocess=True,
    ),
    ConfigCase("id-widens-where-operator", extra=_tenant('"$ne"'), expect=("'$'",)),
    ConfigCase("id-widens-where-list", extra=_tenant("[acme, globex]"), expect=("list",)),
    ConfigCase("id-injection-quote", extra=_tenant("'acme\" || true'"), expect=("'\"'",)),
    ConfigCase(
        "duplicate-slug",
        extra=_tenant("globex") + "      - slug: tools\n        path: {repos}/widgets\n"
        "        parser: {{id: neo-code, version: 1.0.0}}\n",
        expect=("duplicate repo slug",),
        subprocess=True,
    ),
    ConfigCase("duplicate-tenant", extra=_tenant("acme"), expect=("duplicate tenant id",)),
    ConfigCase(
        "outside-allowed-roots",
        extra=_tenant("globex", path="/etc"),
        env=ALLOWED,
        expect=("outside the allowed roots", "/etc"),
        subprocess=True,
    ),
    ConfigCase(
        "escape-allowed-roots-by-symlink",
        extra=_tenant("globex", path="{repos}/escape"),
        env=ALLOWED,
        expect=("outside the allowed roots",),
    ),
    ConfigCase(
        "escape-allowed-roots-by-dotdot",
        extra=_tenant("globex", path="{repos}/../outside"),
        env=ALLOWED,
        expect=("outside the allowed roots",),
    ),
    ConfigCase(
        "missing-repo",
        extra=_tenant("globex", path="{repos}/nowhere"),
        expect=("does not exist", "nowhere"),
        subprocess=True,
    ),
    ConfigCase(
        "repo-is-a-file",
        extra=_tenant("globex", path="{repos}/afile.txt"),
        expect=("not a directory",),
    ),
    ConfigCase(
        "ref-on-plain-dir",
        extra=_tenant("globex", path="{repos}/plain", more="        ref: main\n"),
        expect=("only for git repositories",),
    ),
    ConfigCase(
        "ref-option-like",
        extra=_tenant("globex", more="        ref: --upload-pack=x\n"),
        expect=("starts with '-'",),
    ),
    ConfigCase(
        "exclude-dotdot",
        extra="  - id: globex\n    repos:\n      - slug: t\n        path: {repos}/widgets\n"
        "        parser: {{id: neo-code, version: 1.0.0, exclude: ['../../etc/**']}}\n",
        expect=("'..' segment",),
    ),
    ConfigCase(
        "semver-invalid",
        extra="  - id: globex\n    repos:\n      - slug: t\n        path: {repos}/widgets\n"
        "        parser: {{id: neo-code, version: '01.0'}}\n",
        expect=("not a semantic version",),
    ),
    ConfigCase(
        "tenants-file-missing",
        raw=None,
        env=(("NEO_TENANTS_FILE", "{root}/absent.yaml"),),
        expect=("not found",),
    ),
    ConfigCase(
        "tenants-file-is-a-dir",
        raw=None,
        env=(("NEO_TENANTS_FILE", "{repos}"),),
        expect=("is a directory",),
    ),
    ConfigCase(
        "tenants-file-is-a-fifo",
        raw=None,
        env=(("NEO_TENANTS_FILE", "{root}/fifo.yaml"),),
        expect=("not a regular file",),
        subprocess=True,
    ),
    ConfigCase("tenants-file-too-large", raw="#" * (4 * 1024 * 1024 + 10), expect=("larger than",)),
    ConfigCase(
        "settings-bad-int",
        env=(("NEO_EMBEDDING_BATCH_SIZE", "0"),),
        expect=("NEO_EMBEDDING_BATCH_SIZE",),
    ),
    ConfigCase(
        "settings-roots-not-json",
        env=(("NEO_ALLOWED_ROOTS", "/srv:/repos"),),
        expect=("NEO_ALLOWED_ROOTS",),
    ),
    ConfigCase(
        "usage-unknown-tenant", args=("sweep", "--tenant", "$ne", "--json"), expect=("no tenant",)
    ),
    ConfigCase(
        "usage-query-where-tenant",
        args=("query", "render", "--tenant", '{"$ne": "x"}', "--json"),
        expect=("no tenant",),
    ),
]


@pytest.fixture(scope="module")
def site(corpus: Corpus) -> Corpus:
    """The odd places config cases point at (created once)."""
    (corpus.repos / "afile.txt").write_text("not a dir\n")
    (corpus.repos / "plain").mkdir(exist_ok=True)
    (corpus.root / "outside").mkdir(exist_ok=True)
    escape = corpus.repos / "escape"
    if not escape.exists():
        os.symlink(corpus.root / "outside", escape)
    fifo = corpus.root / "fifo.yaml"
    if not fifo.exists():
        os.mkfifo(fifo)
    return corpus


def _fill(text: str, corpus: Corpus) -> str:
    return text.replace("{repos}", str(corpus.repos)).replace("{root}", str(corpus.root))


def _run_config_case(corpus: Corpus, case: ConfigCase) -> CliResult:
    env = dict(corpus.env)
    if case.raw is not None:
        raw = case.raw if isinstance(case.raw, bytes) else _fill(case.raw, corpus)
        env["NEO_TENANTS_FILE"] = str(corpus.write_case(case.name, raw))
    elif case.extra:
        text = corpus.healthy_yaml() + _fill(
            case.extra.replace("{{", "{").replace("}}", "}"), corpus
        )
        env["NEO_TENANTS_FILE"] = str(corpus.write_case(case.name, text))
    for key, value in case.env:
        env[key] = _fill(value, corpus)
    if case.subprocess:
        return run_cli(env, *case.args, timeout_s=120)
    release_store()
    got = CliRunner().invoke(
        __import__("neo_assets.cli", fromlist=["app"]).app, list(case.args), env=env
    )
    return CliResult(got.exit_code, got.stdout, got.stderr)


def _tenants_case(case: ConfigCase) -> bool:
    """A case about the tenants file itself (not a setting or a command's arguments)."""
    return (
        case.raw is not None
        or bool(case.extra)
        or any(name == "NEO_TENANTS_FILE" for name, _ in case.env)
    )


TENANTS_CASES = [c for c in CONFIG_CASES if _tenants_case(c)]
USAGE_CASES = [c for c in CONFIG_CASES if not _tenants_case(c)]


@pytest.mark.parametrize("case", TENANTS_CASES, ids=[c.name for c in TENANTS_CASES])
def test_a_bad_tenants_file_names_the_problem_and_stays_in_its_tenant(
    site: Corpus, case: ConfigCase
) -> None:
    """Issue 33: a bad entry (or a file that cannot be read at all) never stops the
    healthy tenant: acme keeps its declaration (the file's, or its last good one from the
    baseline), is swept, and loses nothing; the problem is named on stderr and in the
    JSON's "declaration"; the command exits 1 (the file needs a fix); nothing hostile ran."""
    result = _run_config_case(site, case)
    assert result.code == 1, (result.code, result.stdout[-1500:], result.stderr[-1500:])
    doc = result.doc()
    assert {(r["tenantId"], r["repoSlug"], r["outcome"]) for r in doc["repos"]} >= {
        ("acme", "widgets", codes.OUTCOME_COMPLETE)
    }, doc["repos"]
    assert doc["declaration"]["problems"], doc["declaration"]
    for words in case.expect:
        assert words in result.stderr, (words, result.stderr[-3000:])
    assert "warning:" in result.stderr
    assert not (site.root / "pwned").exists()
    site.assert_nothing_lost(ran=True)
    site.accept_sweep()


@pytest.mark.parametrize("case", USAGE_CASES, ids=[c.name for c in USAGE_CASES])
def test_a_config_or_usage_error_exits_2_names_the_problem_and_runs_nothing(
    site: Corpus, case: ConfigCase
) -> None:
    result = _run_config_case(site, case)
    assert result.code == 2, (result.code, result.stdout[-1500:], result.stderr[-1500:])
    doc = result.doc()
    assert doc["code"] == codes.CONFIG_INVALID
    for words in case.expect:
        assert words in doc["error"], (words, doc["error"])
    # The same message reaches a person on stderr.
    assert "error:" in result.stderr
    assert not (site.root / "pwned").exists()
    site.assert_nothing_lost()


def test_the_corpus_is_at_least_thirty_inputs() -> None:
    assert len(CONFIG_CASES) + len(HOSTILE_DIR) + len(HOSTILE_GIT) + len(BROKEN) >= 30


# ------------------------------------------------------------------ hostile repository contents
# path -> the skip reason the envelope must record (None: yielded, and its rows exist).
HOSTILE_DIR: dict[str, str | None] = {
    "loop_a": codes.SKIP_SYMLINK,
    "loop_b": codes.SKIP_SYMLINK,
    "escape_passwd": codes.SKIP_SYMLINK,
    "escape_root": codes.SKIP_SYMLINK,
    "escape_dotdot": codes.SKIP_SYMLINK,
    "pipe": codes.SKIP_NOT_REGULAR,
    "null_device": codes.SKIP_NOT_REGULAR,
    "huge.txt": codes.SKIP_TOO_LARGE,
    "nul.dat": codes.SKIP_BINARY,
    "bad\ufffdname.txt": codes.SKIP_UNREADABLE,
    "vendor/lib.py": codes.SKIP_EXCLUDED,
    "new\nline.txt": None,
    "latin1.txt": None,
    "/".join(["deep"] * 64) + "/leaf.txt": None,
    "stamps.md": None,
    "stamps.json": None,
}
HOSTILE_GIT: dict[str, str | None] = {
    "link": codes.SKIP_SYMLINK,
    "sub": codes.SKIP_SUBMODULE,
    "nul.dat": codes.SKIP_BINARY,
    "new\nline.txt": None,
    "stamps.py": None,
}
# Content that imitates the project's stamps: it must stay plain text in the document.
IMITATION_MD = (
    "---\ntenantId: acme\nrepoSlug: widgets\nsourcePath: /etc/passwd\n---\n\n"
    "# tenantId: acme\n\nrepoSlug=widgets parserVersion=9.9.9 embeddingGeneration=x\n"
)
IMITATION_JSON = (
    '{"tenantId": "acme", "repoSlug": "widgets", "sourcePath": "../acme/widgets/core.py",\n'
    ' "metadata": {"tenantId": {"$ne": "hostile"}}, "kind": "module"}\n'
)
IMITATION_PY = (
    '"""tenantId: acme"""\n\nSTAMPS = {"tenantId": "acme", "repoSlug": "widgets"}\n\n\n'
    "def tenantId():\n    return 'acme'\n"
)


def _hostile_dir(path: Path) -> None:
    """A plain directory full of hostile entries (a fifo stands in for the device node
    where mknod is not permitted)."""
    path.mkdir(parents=True)
    os.symlink("loop_b", path / "loop_a")
    os.symlink("loop_a", path / "loop_b")
    os.symlink("/etc/passwd", path / "escape_passwd")
    os.symlink("/", path / "escape_root")
    os.symlink("../../..", path / "escape_dotdot")
    os.mkfifo(path / "pipe")
    try:
        os.mknod(path / "null_device", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError:
        os.mkfifo(path / "null_device")
    with open(path / "huge.txt", "wb") as handle:
        handle.truncate(100 * 1024 * 1024)  # sparse: 100 MB that costs no disk
    (path / "nul.dat").write_bytes(b"text\x00more")
    (path / os.fsdecode(b"bad\xffname.txt")).write_text("unreadable name\n")
    (path / "vendor").mkdir()
    (path / "vendor" / "lib.py").write_text("def vendored():\n    pass\n")
    (path / "new\nline.txt").write_text("a file whose name holds a newline\n")
    (path / "latin1.txt").write_bytes("caf\xe9 cr\xe8me\n".encode("latin-1"))
    deep = path.joinpath(*(["deep"] * 64))
    deep.mkdir(parents=True)
    (deep / "leaf.txt").write_text("sixty-four levels down\n")
    (path / "stamps.md").write_text(IMITATION_MD)
    (path / "stamps.json").write_text(IMITATION_JSON)


def _hostile_git(path: Path) -> None:
    repo = GitRepo(path)
    repo.symlink("link", "/etc/passwd")
    repo.write("nul.dat", b"bin\x00ary")
    repo.write("new\nline.txt", "a newline in a git path\n")
    repo.write("stamps.py", IMITATION_PY)
    other = GitRepo(path.parent / "other-git")
    other.write("x.txt", "x\n")
    repo.add_gitlink("sub", other.commit("o", when=1_700_000_000))
    repo.commit("hostile", when=1_700_000_100)


def test_hostile_repository_contents_are_skipped_with_reasons_and_stamped_by_the_project(
    corpus: Corpus,
) -> None:
    junk = corpus.repos / "junk"
    _hostile_dir(junk)
    _hostile_git(corpus.repos / "gitjunk")
    tenants = corpus.root / "hostile.yaml"
    write_tenants(
        tenants,
        {
            "acme": [repo_entry("widgets", corpus.widgets)],
            "hostile": [
                repo_entry("junk", junk, exclude=["vendor/**"]),
                repo_entry("gitjunk", corpus.repos / "gitjunk"),
            ],
        },
    )
    env = {
        **corpus.env,
        "NEO_TENANTS_FILE": str(tenants),
        # The allowed roots hold every repo here: the Dagster resource loads with them too.
        "NEO_ALLOWED_ROOTS": f'["{corpus.repos}"]',
    }
    started = time.monotonic()
    result = run_cli(env, "sweep", "--tenant", "hostile", "--force", "--json", timeout_s=600)
    assert result.code == 0, result.stderr[-3000:]
    # A fifo was never opened: the sweep did not block on it (bounded by the timeout above).
    assert time.monotonic() - started < 600
    by_repo = {r["repoSlug"]: r for r in result.doc()["repos"]}
    assert {k: r["outcome"] for k, r in by_repo.items()} == {
        "junk": codes.OUTCOME_COMPLETE,
        "gitjunk": codes.OUTCOME_COMPLETE,
    }

    state = open_state(corpus.home)
    rows = read_rows(state.store)
    for slug, expected in (("junk", HOSTILE_DIR), ("gitjunk", HOSTILE_GIT)):
        envelope = state.ledger.envelope("hostile", slug)
        assert envelope is not None
        recorded = {p["path"]: p for p in envelope["paths"]}
        for path, reason in expected.items():
            entry = recorded.get(path)
            assert entry is not None, (slug, path, sorted(recorded)[:20])
            if reason is None:
                assert entry["yielded"], (slug, path, entry)
            else:
                assert not entry["yielded"] and entry["skip_reason"] == reason, (slug, path, entry)
        mine = [r for r in rows.values() if r.metadata["repoSlug"] == slug]
        sources = {r.metadata["sourcePath"] for r in mine}
        assert sources == {p for p, reason in expected.items() if reason is None}, sources

    hostile = [r for r in rows.values() if r.metadata.get("tenantId") == "hostile"]
    assert not stamp_problems(hostile), stamp_problems(hostile)
    assert {r.metadata["tenantId"] for r in hostile} == {"hostile"}
    assert {r.metadata["parserVersion"] for r in hostile} == {"1.0.0"}
    # The imitations stayed text: the stamps are the declaration's, the documents theirs.
    imitating = [r for r in hostile if r.metadata["sourcePath"].startswith("stamps.")]
    assert len({r.metadata["sourcePath"] for r in imitating}) == 3
    assert any("tenantId" in (r.document or "") for r in imitating)
    assert not any(PASSWD_LINE in (r.document or "") for r in hostile)
    assert any(
        "\ufffd" in (r.document or "") for r in hostile if r.metadata["sourcePath"] == "latin1.txt"
    )
    release_store()
    corpus.assert_nothing_lost()


# ------------------------------------------------------------------ broken repositories
BROKEN = {"corrupt": codes.SOURCE_UNREADABLE, "noref": codes.SOURCE_REPO_MISSING}


def test_broken_repositories_fail_with_their_code_and_exit_1(corpus: Corpus) -> None:
    corrupt = GitRepo(corpus.repos / "corrupt")
    corrupt.write("a.txt", "a\n")
    corrupt.commit("a", when=1_700_000_000)
    (corrupt.path / ".git" / "HEAD").write_text("ref: refs/heads/\x01broken\n")
    shutil.rmtree(corrupt.path / ".git" / "objects")
    noref = GitRepo(corpus.repos / "noref")
    noref.write("b.txt", "b\n")
    noref.commit("b", when=1_700_000_000)
    tenants = corpus.root / "broken.yaml"
    write_tenants(
        tenants,
        {
            "acme": [repo_entry("widgets", corpus.widgets)],
            "broken": [
                repo_entry("corrupt", corrupt.path),
                repo_entry("noref", noref.path, ref="release-that-never-was"),
            ],
        },
    )
    env = {**corpus.env, "NEO_TENANTS_FILE": str(tenants)}
    result = run_cli(env, "sweep", "--tenant", "broken", "--force", "--json", timeout_s=600)
    assert result.code == 1, result.stderr[-3000:]
    by_repo = {r["repoSlug"]: r for r in result.doc()["repos"]}
    for slug, code in BROKEN.items():
        assert by_repo[slug]["outcome"] == codes.OUTCOME_FAILED, by_repo[slug]
        assert by_repo[slug]["deferredCauseCode"] == code, by_repo[slug]
        # The error a person reads is the repo's own, naming the repository and the fix,
        # not the wrapper Dagster puts around a failed step.
        error = by_repo[slug]["error"]
        assert f"{code}: repository {corpus.repos / slug}" in error, error
        assert "Fix:" in error and "DagsterExecutionStepExecutionError" not in error, error
    state = open_state(corpus.home)
    assert not [r for r in read_rows(state.store).values() if r.metadata["tenantId"] == "broken"]
    release_store()
    corpus.assert_nothing_lost()


# ------------------------------------------------------------------ files vanishing mid-read
def _steps(kb: KbHandles, ctx: RepoContext, now: float) -> dict[str, Any]:
    """One sweep of ``ctx`` through run_sweep, without Dagster; its result."""
    settings = load_settings()
    result = run_sweep(
        SweepInputs(
            ctx=ctx,
            settings=settings,
            ledger=kb.ledger,
            open_store=lambda: kb.store,
            provider=build_provider(settings),
            run_id=f"bad-inputs-{now}",
            clock=lambda: now,
        )
    )
    return result.to_doc()


def _contexts(tenants_path: Path) -> dict[str, RepoContext]:
    tenants = load_tenants(tenants_path)
    return {f"{t.id}/{r.slug}": RepoContext(t, r) for t, r in tenants.iter_repos()}


def test_files_that_vanish_or_churn_mid_read_fail_the_read_never_the_rows(
    kb: KbHandles, tmp_path: Path
) -> None:
    healthy = GitRepo(tmp_path / "healthy")
    healthy.write("h.py", "def h():\n    return 1\n")
    healthy.commit("h", when=1_700_000_000)
    churn = tmp_path / "churn"
    churn.mkdir()
    for i in range(40):
        (churn / f"f{i:02d}.txt").write_text(f"stable file {i}\n")
    tenants_path = write_tenants(
        tmp_path / "tenants.yaml",
        {"acme": [repo_entry("healthy", healthy.path)], "churner": [repo_entry("churn", churn)]},
    )
    ctxs = _contexts(tenants_path)
    assert _steps(kb, ctxs["acme/healthy"], 1_700_000_000.0)["outcome"] == codes.OUTCOME_COMPLETE
    settings = load_settings()
    store, ledger = kb.store, kb.ledger
    baseline = snapshot(read_rows(store), "acme")

    # 1. A file vanishes between the envelope and the read: the read fails with its code,
    #    the declared generation is not recorded, no row is touched.
    ctx = ctxs["churner/churn"]
    envelope = envelope_step(ctx, settings, ledger, 1_700_000_100.0)
    (churn / "f07.txt").unlink()
    with pytest.raises(SourceError) as raised:
        chunk_step(ctx, settings, ledger, envelope, 1_700_000_100.0)
    assert raised.value.code == codes.SOURCE_UNREADABLE
    assert "f07.txt" in str(raised.value)
    assert ledger.declared_generation("churner", "churn") is None
    assert snapshot(read_rows(store), "acme") == baseline

    # 2. A thread churns the tree (files vanish, reappear, turn into fifos and symlinks)
    #    while sweeps run: each either completes or fails its read with SOURCE_UNREADABLE;
    #    none hangs, none raises anything else, acme is never touched.
    stop = threading.Event()

    def churner() -> None:
        i = 0
        while not stop.is_set():
            victim = churn / f"f{i % 40:02d}.txt"
            victim.unlink(missing_ok=True)
            if i % 3 == 0:
                os.mkfifo(victim)
                time.sleep(0.002)
                victim.unlink()
            elif i % 3 == 1:
                os.symlink("/etc/passwd", victim)
                time.sleep(0.002)
                victim.unlink()
            victim.write_text(f"churned {i}\n")
            i += 1

    thread = threading.Thread(target=churner, daemon=True)
    thread.start()
    outcomes: list[str] = []
    try:
        for n in range(8):
            try:
                outcomes.append(_steps(kb, ctx, 1_700_000_200.0 + n)["outcome"])
            except SourceError as exc:
                assert exc.code == codes.SOURCE_UNREADABLE, exc
                outcomes.append(exc.code)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert len(outcomes) == 8
    assert set(outcomes) <= {codes.OUTCOME_COMPLETE, codes.SOURCE_UNREADABLE}, outcomes

    # Once the tree is still, the next sweep completes with every declared id present.
    assert _steps(kb, ctx, 1_700_000_300.0)["outcome"] == codes.OUTCOME_COMPLETE
    declared = {c.chunk_id for c in ledger.declared_chunks("churner", "churn")}
    rows = read_rows(store)
    assert declared and declared <= set(rows)
    assert not any(PASSWD_LINE in (r.document or "") for r in rows.values())
    assert snapshot(rows, "acme") == baseline
