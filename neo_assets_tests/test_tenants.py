"""tenants.yaml loading: a valid file loads; every hostile or mistaken file is refused
with ONE error that names the file, the place, the field, what was found and what is
allowed, listing every problem at once."""

import os
import shutil
from pathlib import Path

import pytest

from neo_assets.config.examples import ensure_sample_repo
from neo_assets.config.settings import BUNDLED_TENANTS_FILE, load_settings
from neo_assets.core.codes import CONFIG_INVALID
from neo_assets.core.ids.config_digest import declaration_digest, repo_declaration_digest
from neo_assets.tenants.models import ParserModel, RepoModel, TenantModel, TopModel
from neo_assets.tenants.rules import PARSER_KEYS, REPO_KEYS, TENANT_KEYS, TOP_LEVEL_KEYS
from neo_assets.tenants.validation import (
    ID_PATTERN,
    MAX_PROBLEMS_SHOWN,
    MAX_TENANTS_FILE_BYTES,
    ConfigProblem,
    ParserDecl,
    PathVariableError,
    RepoDecl,
    Tenant,
    TenantsConfigError,
    TenantsFile,
    expand_path_variables,
    is_git_work_tree,
    is_semver,
    is_valid_id,
    load_tenants,
)
from neo_assets_tests.gitrepo import GitRepo

PARSER = "{id: neo-code, version: 1.0.0}"


@pytest.fixture(scope="module")
def git_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real git repo with a commit on main, built once and copied per test (cheap)."""
    repo = GitRepo(tmp_path_factory.mktemp("template") / "git")
    repo.write("src/a.py", "x = 1\n")
    repo.commit("first", when=1_700_000_000)
    return repo.path


@pytest.fixture()
def site(tmp_path: Path, git_template: Path) -> Path:
    """tmp_path/
    conf/               the tenants file goes here (relative paths resolve from it)
    repos/plain/        a plain directory with a file
    repos/git/          a real git repo with one commit on main
    repos/afile.txt     a file, not a directory
    repos/escape ->     a symlink to outside/other
    repos/loop ->       a symlink to itself
    outside/other/      a directory outside repos/
    """
    (tmp_path / "conf").mkdir()
    (tmp_path / "repos" / "plain").mkdir(parents=True)
    (tmp_path / "repos" / "plain" / "a.py").write_text("x = 1\n")
    shutil.copytree(git_template, tmp_path / "repos" / "git", symlinks=True)
    (tmp_path / "repos" / "afile.txt").write_text("not a dir\n")
    (tmp_path / "outside" / "other").mkdir(parents=True)
    os.symlink(tmp_path / "outside" / "other", tmp_path / "repos" / "escape")
    os.symlink("loop", tmp_path / "repos" / "loop")
    return tmp_path


def write_tenants(site: Path, text: str | bytes, name: str = "tenants.yaml") -> Path:
    target = site / "conf" / name
    if isinstance(text, bytes):
        target.write_bytes(text)
    else:
        target.write_text(text, encoding="utf-8")
    return target


def one_tenant(repo: str = "", tenant_id: str = "acme", extra: str = "") -> str:
    """A tenants file with one tenant; ``repo`` is the body of its single repo."""
    repo = repo or f"slug: w\n        path: ../repos/plain\n        parser: {PARSER}"
    return f"tenants:\n  - id: {tenant_id}\n{extra}    repos:\n      - {repo}\n"


def repo_body(**fields: str) -> str:
    """One repo mapping in flow style, starting from a valid plain-dir repo."""
    base = {"slug": "w", "path": "../repos/plain", "parser": PARSER}
    base.update(fields)
    inner = ", ".join(f"{key}: {value}" for key, value in base.items() if value != "<omit>")
    return "{" + inner + "}"


def parser_body(**fields: str) -> str:
    base = {"id": "neo-code", "version": "1.0.0"}
    base.update(fields)
    return "{" + ", ".join(f"{k}: {v}" for k, v in base.items() if v != "<omit>") + "}"


def load_error(path: Path, **kwargs: object) -> TenantsConfigError:
    with pytest.raises(TenantsConfigError) as caught:
        load_tenants(path, **kwargs)  # type: ignore[arg-type]
    return caught.value


def problem_at(error: TenantsConfigError, location: str) -> ConfigProblem:
    matches = [problem for problem in error.problems if problem.location == location]
    assert matches, f"no problem at {location!r}; got {[str(p) for p in error.problems]}"
    return matches[0]


# --------------------------------------------------------------------------- valid files


def test_valid_two_tenant_file_loads_with_resolved_relative_paths(site: Path) -> None:
    path = write_tenants(
        site,
        """\
tenants:
  - id: acme
    repos:
      - slug: widgets
        path: ../repos/git
        ref: main
        parser:
          id: neo-code
          version: 1.0.0
          exclude: ["vendor/**", "*.min.js"]
        cadence_minutes: 30
      - slug: docs
        path: ../repos/plain
        parser: {id: neo-code, version: 2.1.0-rc.1+build.7}
  - id: globex-2
    repos:
      - slug: widgets
        path: %s
        parser: {id: neo-code, version: 1.0.0}
"""
        % (site / "repos" / "git"),
    )
    loaded = load_tenants(path)
    assert loaded == TenantsFile(
        path=path,
        tenants=(
            Tenant(
                id="acme",
                repos=(
                    RepoDecl(
                        slug="widgets",
                        path=(site / "repos" / "git").resolve(),
                        ref="main",
                        parser=ParserDecl("neo-code", "1.0.0", ("vendor/**", "*.min.js")),
                        cadence_minutes=30,
                    ),
                    RepoDecl(
                        slug="docs",
                        path=(site / "repos" / "plain").resolve(),
                        ref=None,
                        parser=ParserDecl("neo-code", "2.1.0-rc.1+build.7", ()),
                        cadence_minutes=None,
                    ),
                ),
            ),
            Tenant(
                id="globex-2",
                repos=(
                    RepoDecl(
                        slug="widgets",
                        path=(site / "repos" / "git").resolve(),
                        ref=None,
                        parser=ParserDecl("neo-code", "1.0.0", ()),
                    ),
                ),
            ),
        ),
    )
    assert all(repo.path.is_absolute() for _, repo in loaded.iter_repos())
    assert [(t.id, r.slug) for t, r in loaded.iter_repos()] == [
        ("acme", "widgets"),
        ("acme", "docs"),
        ("globex-2", "widgets"),
    ]
    assert loaded.tenant("globex-2") is loaded.tenants[1]
    assert loaded.tenant("nobody") is None
    assert loaded.tenants[0].repo("docs") is loaded.tenants[0].repos[1]
    assert loaded.tenants[0].repo("nope") is None


def test_relative_paths_resolve_against_the_files_folder_not_the_cwd(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_tenants(site, one_tenant())
    monkeypatch.chdir(site / "outside")
    loaded = load_tenants(Path("..") / "conf" / "tenants.yaml")
    assert loaded.path == path
    assert loaded.tenants[0].repos[0].path == (site / "repos" / "plain").resolve()


def test_a_plain_non_git_directory_loads_as_such(site: Path) -> None:
    loaded = load_tenants(write_tenants(site, one_tenant()))
    repo = loaded.tenants[0].repos[0]
    assert repo.ref is None
    assert not is_git_work_tree(repo.path)
    assert is_git_work_tree((site / "repos" / "git").resolve())


def test_tenant_with_no_repos_loads(site: Path) -> None:
    loaded = load_tenants(write_tenants(site, "tenants:\n  - id: acme\n    repos: []\n"))
    assert loaded.tenants == (Tenant(id="acme", repos=()),)


def test_null_optional_fields_mean_not_given(site: Path) -> None:
    text = one_tenant(repo_body(ref="null", cadence_minutes="~", parser=parser_body(exclude="")))
    repo = load_tenants(write_tenants(site, text)).tenants[0].repos[0]
    assert (repo.ref, repo.cadence_minutes, repo.parser.exclude) == (None, None, ())


def test_anchors_and_merge_keys_are_allowed(site: Path) -> None:
    text = """\
tenants:
  - id: acme
    repos:
      - slug: a
        path: ../repos/plain
        parser: &p {id: neo-code, version: 1.0.0, exclude: ["x/**"]}
      - slug: b
        path: ../repos/plain
        parser:
          <<: *p
          version: 1.1.0
"""
    loaded = load_tenants(write_tenants(site, text))
    assert [r.parser for r in loaded.tenants[0].repos] == [
        ParserDecl("neo-code", "1.0.0", ("x/**",)),
        ParserDecl("neo-code", "1.1.0", ("x/**",)),
    ]


def test_tilde_expands_to_home(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(site / "repos"))
    text = one_tenant(repo_body(path="~/plain"))
    repo = load_tenants(write_tenants(site, text)).tenants[0].repos[0]
    assert repo.path == (site / "repos" / "plain").resolve()


def test_neo_home_variable_expands_to_the_set_neo_home(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = site / "elsewhere" / "home"
    (home / "examples" / "sample").mkdir(parents=True)
    monkeypatch.setenv("NEO_HOME", str(home))
    text = one_tenant(repo_body(path='"${NEO_HOME}/examples/sample"'))
    repo = load_tenants(write_tenants(site, text)).tenants[0].repos[0]
    assert repo.path == (home / "examples" / "sample").resolve()


def test_neo_home_variable_follows_a_relative_neo_home_from_the_cwd(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As Settings.home_dir reads it: relative to the current directory, not to the file.
    (site / "outside" / "data" / "sample").mkdir(parents=True)
    monkeypatch.setenv("NEO_HOME", "data")
    monkeypatch.chdir(site / "outside")
    text = one_tenant(repo_body(path='"${NEO_HOME}/sample"'))
    repo = load_tenants(write_tenants(site, text)).tenants[0].repos[0]
    assert repo.path == (site / "outside" / "data" / "sample").resolve()


def test_neo_home_variable_defaults_to_dot_neo_in_the_cwd_when_unset(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (site / "outside" / ".neo" / "sample").mkdir(parents=True)
    monkeypatch.delenv("NEO_HOME", raising=False)
    monkeypatch.chdir(site / "outside")
    text = one_tenant(repo_body(path='"${NEO_HOME}/sample"'))
    repo = load_tenants(write_tenants(site, text)).tenants[0].repos[0]
    assert repo.path == (site / "outside" / ".neo" / "sample").resolve()


def test_an_explicit_home_wins_over_the_environment(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The CLI and the Dagster resource pass their settings' home (the resource's may be
    # overridden in run config), so the file follows the home everything else uses.
    monkeypatch.setenv("NEO_HOME", str(site / "nowhere"))
    text = one_tenant(repo_body(path='"${NEO_HOME}/plain"'))
    repo = load_tenants(write_tenants(site, text), home=site / "repos").tenants[0].repos[0]
    assert repo.path == (site / "repos" / "plain").resolve()


def test_a_missing_neo_home_directory_names_what_neo_home_is(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEO_HOME", str(site / "empty-home"))
    path = write_tenants(site, one_tenant(repo_body(path='"${NEO_HOME}/examples/x"')))
    problem = problem_at(load_error(path), "tenants['acme'].repos['w'].path")
    assert "does not exist" in problem.message
    assert f"${{NEO_HOME}} is {str(site / 'empty-home')!r}" in problem.message


def test_unreadable_settings_behind_neo_home_are_a_problem_not_a_crash(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEO_EMBEDDING_DIMENSIONS", "many")
    path = write_tenants(site, one_tenant(repo_body(path='"${NEO_HOME}/plain"')))
    problem = problem_at(load_error(path), "tenants['acme'].repos['w'].path")
    assert "settings cannot be read" in problem.message
    assert "NEO_EMBEDDING_DIMENSIONS" in problem.message
    assert "\n" not in problem.message
    # A path that does not use ${NEO_HOME} never reads the settings.
    assert load_tenants(write_tenants(site, one_tenant())).tenants[0].repos[0].slug == "w"


def test_an_unknown_variable_names_the_file_tenant_repo_and_field(site: Path) -> None:
    text = one_tenant(repo_body(slug="widgets", path='"${WORKSPACE}/widgets"'))
    path = write_tenants(site, text)
    error = load_error(path)
    message = str(error)
    assert str(path) in message
    assert "tenants['acme'].repos['widgets'].path (line 4): " in message
    assert "unknown variable ${WORKSPACE}" in message
    assert "'${WORKSPACE}/widgets'" in message  # what was found


def test_a_doubled_dollar_is_a_literal_dollar(site: Path) -> None:
    (site / "repos" / "cost$centre").mkdir()
    text = one_tenant(repo_body(path='"../repos/cost$$centre"'))
    repo = load_tenants(write_tenants(site, text)).tenants[0].repos[0]
    assert repo.path == (site / "repos" / "cost$centre").resolve()


def test_the_shipped_example_finds_the_sample_made_under_neo_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # examples/tenants.yaml and `python -m neo_assets.config.examples` (both run by
    # `make run`) must agree on where the sample repository lives.
    home = tmp_path / "home"
    monkeypatch.setenv("NEO_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    sample = ensure_sample_repo(load_settings().store.home_dir)
    loaded = load_tenants(BUNDLED_TENANTS_FILE)
    widgets = loaded.tenant("acme").repo("widgets")  # type: ignore[union-attr]
    assert widgets is not None and widgets.path == sample.resolve()
    assert widgets.path.is_relative_to(home.resolve())
    itself = loaded.tenant("neo-self").repo("neo-assets")  # type: ignore[union-attr]
    assert itself is not None and itself.path == BUNDLED_TENANTS_FILE.parent.parent.resolve()


def test_same_slug_in_two_tenants_is_fine(site: Path) -> None:
    text = (
        f"tenants:\n  - {{id: a, repos: [{repo_body()}]}}\n  - {{id: b, repos: [{repo_body()}]}}\n"
    )
    loaded = load_tenants(write_tenants(site, text))
    assert [r.slug for _, r in loaded.iter_repos()] == ["w", "w"]


def test_utf8_bom_is_accepted(site: Path) -> None:
    path = write_tenants(site, b"\xef\xbb\xbf" + one_tenant().encode())
    assert load_tenants(path).tenants[0].id == "acme"


def test_allowed_roots_accepts_paths_inside(site: Path) -> None:
    loaded = load_tenants(write_tenants(site, one_tenant()), allowed_roots=[site / "repos"])
    assert loaded.tenants[0].repos[0].path == (site / "repos" / "plain").resolve()


def test_check_paths_false_skips_filesystem_checks_but_not_the_schema(site: Path) -> None:
    missing = one_tenant(repo_body(path="../repos/nope", ref="main"))
    loaded = load_tenants(write_tenants(site, missing), check_paths=False)
    assert loaded.tenants[0].repos[0].path == (site / "repos" / "nope").resolve()
    assert loaded.tenants[0].repos[0].ref == "main"

    outside = one_tenant(repo_body(path="../outside/other"))
    error = load_error(
        write_tenants(site, outside), check_paths=False, allowed_roots=[site / "repos"]
    )
    assert (
        "outside the allowed roots" in problem_at(error, "tenants['acme'].repos['w'].path").message
    )

    bad_id = one_tenant(tenant_id="Acme")
    error = load_error(write_tenants(site, bad_id), check_paths=False)
    problem_at(error, "tenants[0].id")


# --------------------------------------------------------------------------- the hostile corpus

REPO = "tenants['acme'].repos['w']"
CYRILLIC_A = "\u0430"
FULLWIDTH_ONE = "\uff11"

# (case id, file text, location of the expected problem, fragments its message must hold,
#  load_tenants kwargs). Every case also checks the file, the location and "allowed".
CORPUS: list[tuple[str, str, str, tuple[str, ...], dict[str, object]]] = [
    # --- bad YAML
    ("yaml-unclosed-flow", "tenants: [\n", "(file)", ("invalid yaml at line", "column"), {}),
    ("yaml-tab-indent", "tenants:\n\t- id: acme\n", "(file)", ("invalid yaml at line 2",), {}),
    (
        "yaml-bad-indent",
        "tenants:\n  - id: acme\n   repos: []\n",
        "(file)",
        ("invalid yaml at line 3", "found the line"),
        {},
    ),
    (
        "yaml-duplicate-key",
        "tenants:\n  - id: acme\n    id: other\n    repos: []\n",
        "(file)",
        ("duplicate key 'id'", "first at line 2"),
        {},
    ),
    (
        "yaml-python-tag",
        "tenants: !!python/object/apply:os.system ['true']\n",
        "(file)",
        ("invalid yaml", "constructor"),
        {},
    ),
    ("yaml-two-documents", "tenants: []\n---\ntenants: []\n", "(file)", ("single document",), {}),
    ("yaml-unhashable-key", "tenants:\n  ? [a, b]\n  : 1\n", "(file)", ("unhashable",), {}),
    # --- structure
    ("empty-file", "", "(file)", ("empty",), {}),
    ("comments-only", "# nothing here\n\n", "(file)", ("empty",), {}),
    ("top-level-list", "- id: acme\n", "(file)", ("top level must be a mapping", "'tenants:'"), {}),
    ("top-level-scalar", "acme\n", "(file)", ("top level must be a mapping",), {}),
    ("tenants-missing", "tenant: []\n", "tenants", ("missing required key 'tenants'",), {}),
    ("tenants-typo", "tenant: []\n", "tenant", ("unknown key", "did you mean 'tenants'"), {}),
    ("tenants-null", "tenants:\n", "tenants", ("null",), {}),
    ("tenants-mapping", "tenants: {id: acme}\n", "tenants", ("must be a list", "- id: acme"), {}),
    ("tenants-string", "tenants: acme\n", "tenants", ("must be a list",), {}),
    ("tenants-empty", "tenants: []\n", "tenants", ("empty",), {}),
    ("tenant-not-mapping", "tenants: [acme]\n", "tenants[0]", ("must be a mapping",), {}),
    ("tenant-missing-id", "tenants: [{repos: []}]\n", "tenants[0].id", ("missing required",), {}),
    (
        "tenant-missing-repos",
        "tenants: [{id: acme}]\n",
        "tenants['acme'].repos",
        ("missing required key 'repos'",),
        {},
    ),
    (
        "unknown-top-key",
        "tenants: [{id: acme, repos: []}]\nversion: 2\n",
        "version",
        ("unknown key", "allowed keys: tenants"),
        {},
    ),
    (
        "unknown-tenant-key",
        "tenants: [{id: acme, repos: [], name: Acme}]\n",
        "tenants['acme'].name",
        ("unknown key", "allowed keys: id, repos"),
        {},
    ),
    (
        "unknown-repo-key-typo",
        one_tenant(repo_body(pth="../repos/plain")),
        f"{REPO}.pth",
        ("unknown key", "did you mean 'path'", "slug, path, ref, parser, cadence_minutes"),
        {},
    ),
    (
        "unknown-repo-key-case",
        one_tenant(repo_body(Ref="main")),
        f"{REPO}.Ref",
        ("did you mean 'ref'",),
        {},
    ),
    (
        "unknown-repo-key-cadence",
        one_tenant(repo_body(cadence="30")),
        f"{REPO}.cadence",
        ("did you mean 'cadence_minutes'",),
        {},
    ),
    (
        "unknown-key-not-a-string",
        one_tenant(repo_body(**{"1": "x"})),
        f"{REPO}.1",
        ("unknown key", "(integer)"),
        {},
    ),
    (
        "unknown-parser-key",
        one_tenant(repo_body(parser=parser_body(excludes="[]"))),
        f"{REPO}.parser.excludes",
        ("did you mean 'exclude'", "allowed keys: id, version, exclude"),
        {},
    ),
    (
        "repos-mapping",
        "tenants: [{id: acme, repos: {slug: w}}]\n",
        "tenants['acme'].repos",
        ("must be a list", "- slug: widgets"),
        {},
    ),
    (
        "repo-not-mapping",
        "tenants: [{id: acme, repos: [w]}]\n",
        "tenants['acme'].repos[0]",
        ("must be a mapping",),
        {},
    ),
    # --- ids and slugs
    (
        "id-integer",
        one_tenant(tenant_id="123"),
        "tenants[0].id",
        ("must be a string", "123 (integer)", "quotes"),
        {},
    ),
    ("id-octal-looking", one_tenant(tenant_id="0123"), "tenants[0].id", ("integer",), {}),
    (
        "id-norway-bool",
        one_tenant(tenant_id="no"),
        "tenants[0].id",
        ("false (boolean)", "quotes"),
        {},
    ),
    ("id-date", one_tenant(tenant_id="2024-01-01"), "tenants[0].id", ("(date)", "quotes"), {}),
    (
        "id-uppercase",
        one_tenant(tenant_id="Acme"),
        "tenants[0].id",
        ("uppercase", "perhaps 'acme'"),
        {},
    ),
    (
        "id-cyrillic-a",
        one_tenant(tenant_id=f"{CYRILLIC_A}cme"),
        "tenants[0].id",
        ("non-ascii", "u+0430", "cyrillic small letter a"),
        {},
    ),
    (
        "id-fullwidth-digit",
        one_tenant(tenant_id=f"acme{FULLWIDTH_ONE}"),
        "tenants[0].id",
        ("u+ff11", "look-alike of '1'"),
        {},
    ),
    (
        "id-zero-width-space",
        one_tenant(tenant_id='"ac\u200bme"'),
        "tenants[0].id",
        ("u+200b",),
        {},
    ),
    ("id-leading-space", one_tenant(tenant_id='" acme"'), "tenants[0].id", ("whitespace",), {}),
    ("id-trailing-space", one_tenant(tenant_id='"acme "'), "tenants[0].id", ("whitespace",), {}),
    (
        "id-trailing-newline",
        one_tenant(tenant_id='"acme\\n"'),
        "tenants[0].id",
        ("control character '\\n'", "'acme\\n'"),
        {},
    ),
    (
        "id-tab-inside",
        one_tenant(tenant_id='"ac\\tme"'),
        "tenants[0].id",
        ("control character",),
        {},
    ),
    ("id-underscore", one_tenant(tenant_id="ac_me"), "tenants[0].id", ("'_'",), {}),
    ("id-dot", one_tenant(tenant_id="ac.me"), "tenants[0].id", ("'.'",), {}),
    ("id-leading-dash", one_tenant(tenant_id='"-acme"'), "tenants[0].id", ("starts with '-'",), {}),
    ("id-too-long", one_tenant(tenant_id="a" * 64), "tenants[0].id", ("64 characters",), {}),
    ("id-empty", one_tenant(tenant_id='""'), "tenants[0].id", ("empty",), {}),
    ("id-null", one_tenant(tenant_id="null"), "tenants[0].id", ("null",), {}),
    ("id-list", one_tenant(tenant_id="[acme]"), "tenants[0].id", ("(list)",), {}),
    (
        "id-where-filter-operator",
        one_tenant(tenant_id='{"$ne": ""}'),
        "tenants[0].id",
        ("(mapping)",),
        {},
    ),
    (
        "id-where-filter-quotes",
        one_tenant(tenant_id="\"acme' OR tenantId != '\""),
        "tenants[0].id",
        ("' '", '"\'"', "'!'"),
        {},
    ),
    (
        "duplicate-tenant-id",
        "tenants:\n  - {id: acme, repos: []}\n  - {id: acme, repos: []}\n",
        "tenants[1].id",
        ("duplicate tenant id", "tenants[0]"),
        {},
    ),
    (
        "duplicate-slug",
        f"tenants:\n  - id: acme\n    repos: [{repo_body()}, {repo_body()}]\n",
        "tenants['acme'].repos[1].slug",
        ("duplicate repo slug", "tenants['acme'].repos[0]"),
        {},
    ),
    (
        "slug-cyrillic",
        one_tenant(repo_body(slug=f"w{CYRILLIC_A}")),
        "tenants['acme'].repos[0].slug",
        ("u+0430",),
        {},
    ),
    (
        "slug-trailing-newline",
        one_tenant(repo_body(slug='"w\\n"')),
        "tenants['acme'].repos[0].slug",
        ("control character",),
        {},
    ),
    (
        "slug-slash",
        one_tenant(repo_body(slug="a/b")),
        "tenants['acme'].repos[0].slug",
        ("'/'",),
        {},
    ),
    (
        "slug-missing",
        one_tenant(repo_body(slug="<omit>")),
        "tenants['acme'].repos[0].slug",
        ("missing",),
        {},
    ),
    # --- paths
    (
        "path-missing-key",
        one_tenant(repo_body(path="<omit>")),
        f"{REPO}.path",
        ("missing required key 'path'",),
        {},
    ),
    (
        "path-integer",
        one_tenant(repo_body(path="42")),
        f"{REPO}.path",
        ("must be a string", "integer"),
        {},
    ),
    (
        "path-list",
        one_tenant(repo_body(path="[a]")),
        f"{REPO}.path",
        ("must be a string", "(list)"),
        {},
    ),
    ("path-empty", one_tenant(repo_body(path='""')), f"{REPO}.path", ("empty",), {}),
    ("path-nul", one_tenant(repo_body(path='"a\\0b"')), f"{REPO}.path", ("nul",), {}),
    (
        "path-missing-dir",
        one_tenant(repo_body(path="../repos/nope")),
        f"{REPO}.path",
        ("does not exist", "repos/nope'", "relative paths resolve against"),
        {},
    ),
    (
        "path-is-a-file",
        one_tenant(repo_body(path="../repos/afile.txt")),
        f"{REPO}.path",
        ("is a file, not a directory", "afile.txt"),
        {},
    ),
    (
        "path-outside-allowed-roots",
        one_tenant(repo_body(path="../outside/other")),
        f"{REPO}.path",
        ("outside the allowed roots", "outside/other"),
        {"allowed_roots": ["<site>/repos"]},
    ),
    (
        "path-dotdot-escape",
        one_tenant(repo_body(path="../repos/plain/../../outside/other")),
        f"{REPO}.path",
        ("outside the allowed roots",),
        {"allowed_roots": ["<site>/repos"]},
    ),
    (
        "path-symlink-escape",
        one_tenant(repo_body(path="../repos/escape")),
        f"{REPO}.path",
        ("outside the allowed roots", "outside/other"),
        {"allowed_roots": ["<site>/repos"]},
    ),
    (
        "path-root-dir",
        one_tenant(repo_body(path="/")),
        f"{REPO}.path",
        ("outside the allowed roots",),
        {"allowed_roots": ["<site>/repos"]},
    ),
    (
        "path-no-allowed-roots",
        one_tenant(),
        f"{REPO}.path",
        ("outside the allowed roots", "(none)"),
        {"allowed_roots": []},
    ),
    (
        "path-symlink-loop",
        one_tenant(repo_body(path="../repos/loop")),
        f"{REPO}.path",
        ("cannot be resolved",),
        {},
    ),
    (
        "path-unknown-variable",
        one_tenant(repo_body(path='"${REPOS}/plain"')),
        f"{REPO}.path",
        (
            "unknown variable ${REPOS}",
            "${NEO_HOME} (the data root, NEO_HOME) is the only",
            "not expanded",
        ),
        {},
    ),
    (
        "path-home-variable",
        one_tenant(repo_body(path='"${HOME}/plain"')),
        f"{REPO}.path",
        ("unknown variable ${HOME}", "write '~'"),
        {},
    ),
    (
        "path-misspelt-variable",
        one_tenant(repo_body(path='"${neo_home}/plain"')),
        f"{REPO}.path",
        ("unknown variable ${neo_home}", "did you mean ${NEO_HOME}?"),
        {},
    ),
    (
        "path-unclosed-variable",
        one_tenant(repo_body(path='"${NEO_HOME/plain"')),
        f"{REPO}.path",
        ("unclosed", "no closing '}'"),
        {},
    ),
    (
        "path-empty-variable",
        one_tenant(repo_body(path='"${}/plain"')),
        f"{REPO}.path",
        ("empty variable reference ${}",),
        {},
    ),
    (
        "path-bare-dollar-variable",
        one_tenant(repo_body(path='"$NEO_HOME/plain"')),
        f"{REPO}.path",
        ("'$NEO_HOME'", "write ${NEO_HOME}", "'$$'"),
        {},
    ),
    # --- ref
    (
        "ref-on-plain-dir",
        one_tenant(repo_body(ref="main")),
        f"{REPO}.ref",
        ("only for git repositories", "plain directory", "omit 'ref'"),
        {},
    ),
    (
        "ref-option-injection",
        one_tenant(repo_body(path="../repos/git", ref='"--output=/tmp/x"')),
        f"{REPO}.ref",
        ("starts with '-'", "git option"),
        {},
    ),
    (
        "ref-space",
        one_tenant(repo_body(path="../repos/git", ref='"ma in"')),
        f"{REPO}.ref",
        ("' '",),
        {},
    ),
    (
        "ref-dotdot",
        one_tenant(repo_body(path="../repos/git", ref="main..dev")),
        f"{REPO}.ref",
        ("'..'",),
        {},
    ),
    (
        "ref-integer",
        one_tenant(repo_body(path="../repos/git", ref="2024")),
        f"{REPO}.ref",
        ("must be a string", "quotes"),
        {},
    ),
    (
        "ref-lock",
        one_tenant(repo_body(path="../repos/git", ref="main.lock")),
        f"{REPO}.ref",
        (".lock",),
        {},
    ),
    (
        "ref-empty",
        one_tenant(repo_body(path="../repos/git", ref='""')),
        f"{REPO}.ref",
        ("empty",),
        {},
    ),
    # --- parser
    (
        "parser-missing",
        one_tenant(repo_body(parser="<omit>")),
        f"{REPO}.parser",
        ("missing required key 'parser'",),
        {},
    ),
    (
        "parser-string",
        one_tenant(repo_body(parser="neo-code")),
        f"{REPO}.parser",
        ("must be a mapping", "neo-code"),
        {},
    ),
    (
        "parser-id-bad",
        one_tenant(repo_body(parser=parser_body(id="Neo_Code"))),
        f"{REPO}.parser.id",
        ("invalid parser id",),
        {},
    ),
    (
        "parser-id-missing",
        one_tenant(repo_body(parser=parser_body(id="<omit>"))),
        f"{REPO}.parser.id",
        ("missing",),
        {},
    ),
    (
        "version-missing",
        one_tenant(repo_body(parser=parser_body(version="<omit>"))),
        f"{REPO}.parser.version",
        ("missing",),
        {},
    ),
    (
        "version-two-parts",
        one_tenant(repo_body(parser=parser_body(version='"1.0"'))),
        f"{REPO}.parser.version",
        ("not a semantic version", "major.minor.patch"),
        {},
    ),
    (
        "version-float",
        one_tenant(repo_body(parser=parser_body(version="1.0"))),
        f"{REPO}.parser.version",
        ("must be a string", "1.0 (float)", "quotes"),
        {},
    ),
    (
        "version-integer",
        one_tenant(repo_body(parser=parser_body(version="1"))),
        f"{REPO}.parser.version",
        ("must be a string", "(integer)"),
        {},
    ),
    (
        "version-v-prefix",
        one_tenant(repo_body(parser=parser_body(version="v1.0.0"))),
        f"{REPO}.parser.version",
        ("not a semantic version",),
        {},
    ),
    (
        "version-leading-zero",
        one_tenant(repo_body(parser=parser_body(version="01.0.0"))),
        f"{REPO}.parser.version",
        ("not a semantic version",),
        {},
    ),
    (
        "version-trailing-newline",
        one_tenant(repo_body(parser=parser_body(version='"1.0.0\\n"'))),
        f"{REPO}.parser.version",
        ("not a semantic version",),
        {},
    ),
    (
        "version-fullwidth",
        one_tenant(repo_body(parser=parser_body(version=f"1.0.{FULLWIDTH_ONE}"))),
        f"{REPO}.parser.version",
        ("not a semantic version",),
        {},
    ),
    (
        "version-neo-code-unknown-major",
        one_tenant(repo_body(parser=parser_body(version="3.0.0"))),
        f"{REPO}.parser.version",
        ("neo-code has no parser version '3.0.0'", "0.x, 1.x, 2.x"),
        {},
    ),
    (
        "parser-id-unknown",
        one_tenant(repo_body(parser=parser_body(id="neo-cod"))),
        f"{REPO}.parser.id",
        (
            "unknown parser 'neo-cod'",
            "did you mean 'neo-code'",
            "available parsers: neo-code (versions 0.x, 1.x, 2.x)",
        ),
        {},
    ),
    (
        "parser-id-unknown-any-version",
        one_tenant(repo_body(parser=parser_body(id="tree-sitter", version="9.9.9"))),
        f"{REPO}.parser.id",
        ("unknown parser 'tree-sitter'", "available parsers: neo-code"),
        {},
    ),
    (
        "exclude-string",
        one_tenant(repo_body(parser=parser_body(exclude='"vendor/**"'))),
        f"{REPO}.parser.exclude",
        ("must be a list", "['vendor/**']"),
        {},
    ),
    (
        "exclude-mapping",
        one_tenant(repo_body(parser=parser_body(exclude="{a: b}"))),
        f"{REPO}.parser.exclude",
        ("must be a list", "(mapping)"),
        {},
    ),
    (
        "exclude-absolute",
        one_tenant(repo_body(parser=parser_body(exclude='["/etc/**"]'))),
        f"{REPO}.parser.exclude[0]",
        ("absolute",),
        {},
    ),
    (
        "exclude-empty-item",
        one_tenant(repo_body(parser=parser_body(exclude='["a", ""]'))),
        f"{REPO}.parser.exclude[1]",
        ("empty",),
        {},
    ),
    (
        "exclude-nul",
        one_tenant(repo_body(parser=parser_body(exclude='["a\\0b"]'))),
        f"{REPO}.parser.exclude[0]",
        ("nul",),
        {},
    ),
    (
        "exclude-dotdot",
        one_tenant(repo_body(parser=parser_body(exclude='["../x/**"]'))),
        f"{REPO}.parser.exclude[0]",
        ("'..'",),
        {},
    ),
    (
        "exclude-number",
        one_tenant(repo_body(parser=parser_body(exclude="[1]"))),
        f"{REPO}.parser.exclude[0]",
        ("must be a string",),
        {},
    ),
    # --- cadence
    (
        "cadence-zero",
        one_tenant(repo_body(cadence_minutes="0")),
        f"{REPO}.cadence_minutes",
        ("out of range", "from 1 to"),
        {},
    ),
    (
        "cadence-negative",
        one_tenant(repo_body(cadence_minutes="-5")),
        f"{REPO}.cadence_minutes",
        ("out of range",),
        {},
    ),
    (
        "cadence-bool",
        one_tenant(repo_body(cadence_minutes="yes")),
        f"{REPO}.cadence_minutes",
        ("must be an integer", "(boolean)"),
        {},
    ),
    (
        "cadence-string",
        one_tenant(repo_body(cadence_minutes='"30"')),
        f"{REPO}.cadence_minutes",
        ("must be an integer", "without quotes"),
        {},
    ),
    (
        "cadence-float",
        one_tenant(repo_body(cadence_minutes="1.5")),
        f"{REPO}.cadence_minutes",
        ("must be an integer", "(float)"),
        {},
    ),
    (
        "cadence-huge",
        one_tenant(repo_body(cadence_minutes="99999999999999999999")),
        f"{REPO}.cadence_minutes",
        ("out of range",),
        {},
    ),
]


@pytest.mark.parametrize(
    ("text", "location", "fragments", "kwargs"),
    [pytest.param(text, loc, frags, kw, id=case) for case, text, loc, frags, kw in CORPUS],
)
def test_hostile_tenants_file_is_refused_with_a_message_naming_everything(
    site: Path, text: str, location: str, fragments: tuple[str, ...], kwargs: dict[str, object]
) -> None:
    kwargs = {
        key: [Path(str(v).replace("<site>", str(site))) for v in value]  # type: ignore[attr-defined]
        if key == "allowed_roots"
        else value
        for key, value in kwargs.items()
    }
    path = write_tenants(site, text)
    error = load_error(path, **kwargs)
    problem = problem_at(error, location)
    message = str(error)
    assert str(path) in message  # the file
    assert str(problem) in message  # the location and the field, with the problem
    assert problem.message.count("allowed") >= 1  # what is allowed
    assert "found" in problem.message  # what was found
    for fragment in fragments:
        assert fragment.lower() in problem.message.lower(), (fragment, problem.message)
    assert error.code == CONFIG_INVALID
    assert error.path == path


def test_corpus_is_large_and_ids_are_unique() -> None:
    case_ids = [case[0] for case in CORPUS]
    assert len(case_ids) == len(set(case_ids))
    assert len(case_ids) >= 30


# --------------------------------------------------------------------------- file-level errors


def test_missing_file_says_how_to_create_it(tmp_path: Path) -> None:
    path = tmp_path / "nope" / "tenants.yaml"
    error = load_error(path)
    message = str(error)
    assert str(path) in message
    assert "not found" in message
    assert "NEO_TENANTS_FILE" in message
    assert "examples/tenants.yaml" in message
    assert [p.location for p in error.problems] == ["(file)"]


def test_directory_instead_of_file(tmp_path: Path) -> None:
    error = load_error(tmp_path)
    assert "is a directory" in str(error) and "allowed" in str(error)


def test_path_through_a_file_cannot_be_inspected(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    error = load_error(tmp_path / "afile" / "tenants.yaml")
    assert "cannot be inspected" in str(error) and "NEO_TENANTS_FILE" in str(error)


def test_unreadable_file(site: Path) -> None:
    path = write_tenants(site, one_tenant())
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running as root: permission bits do not stop this process reading")
        error = load_error(path)
        assert "cannot be read" in str(error) and "permissions" in str(error)
    finally:
        path.chmod(0o644)


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "tenants.yaml"
    os.mkfifo(fifo)
    error = load_error(fifo)  # opening a FIFO for reading would block forever
    assert "not a regular file" in str(error)


def test_invalid_utf8(site: Path) -> None:
    path = write_tenants(site, b"tenants:\n  - id: acme\xff\n")
    error = load_error(path)
    assert "not valid UTF-8" in str(error)
    assert error.problems[0].line == 2


def test_oversized_file(site: Path) -> None:
    path = write_tenants(site, b"#" * (MAX_TENANTS_FILE_BYTES + 1))
    error = load_error(path)
    assert f"at most {MAX_TENANTS_FILE_BYTES} bytes" in str(error)


def test_yaml_error_carries_line_and_column(site: Path) -> None:
    path = write_tenants(site, "tenants:\n  - id: acme\n    repos: [\n")
    (problem,) = load_error(path).problems
    assert problem.location == "(file)"
    assert problem.line is not None and problem.line >= 3
    assert f"line {problem.line}, column" in problem.message


# --------------------------------------------------------------------------- all at once


def test_every_problem_is_collected_in_one_error_with_lines(site: Path) -> None:
    text = """\
tenants:
  - id: acme
    repos:
      - slug: w
        path: ../repos/nope
        parser: {id: neo-code, version: "1.0"}
        cadence_minutes: 0
      - slug: w
        path: ../repos/plain
        parser: {id: neo-code, version: 1.0.0}
  - id: Bad
    repos: []
    colour: red
"""
    error = load_error(write_tenants(site, text))
    got = {(p.location, p.line) for p in error.problems}
    assert got == {
        ("tenants['acme'].repos['w'].path", 5),
        ("tenants['acme'].repos['w'].parser.version", 6),
        ("tenants['acme'].repos['w'].cadence_minutes", 7),
        ("tenants['acme'].repos[1].slug", 8),
        ("tenants[1].id", 11),
        ("tenants[1].colour", 13),
    }
    assert str(error).startswith(
        f"invalid tenants file {site / 'conf' / 'tenants.yaml'} (6 problems"
    )
    for problem in error.problems:
        assert f"  - {problem}" in str(error)


def test_many_problems_are_all_kept_but_the_message_stays_bounded(site: Path) -> None:
    count = MAX_PROBLEMS_SHOWN + 10
    text = "tenants:\n" + "".join(f"  - {{id: Bad{i}, repos: []}}\n" for i in range(count))
    error = load_error(write_tenants(site, text))
    assert len(error.problems) == count
    assert "... and 10 more" in str(error)
    assert str(error).count("\n  - ") == MAX_PROBLEMS_SHOWN


def test_huge_values_are_truncated_in_messages(site: Path) -> None:
    error = load_error(write_tenants(site, one_tenant(tenant_id="A" * 100_000)))
    assert len(str(error)) < 2_000
    assert "100000 characters long" in str(error)

    many_scripts = "".join(chr(0x4E00 + i) for i in range(5_000))  # 5,000 distinct CJK
    error = load_error(write_tenants(site, one_tenant(tenant_id=many_scripts)))
    assert len(str(error)) < 2_000
    assert "and 4997 more non-ASCII characters" in str(error)


@pytest.mark.timeout(60)  # an exponential walk would hang here, not fail
def test_alias_bomb_is_refused_quickly_with_a_short_message(site: Path) -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    text = "\n".join(levels) + "\n" + one_tenant(repo_body(parser=parser_body(exclude="*a8")))
    error = load_error(write_tenants(site, text))
    assert len(str(error)) < 20_000
    problem_at(error, "a0")
    problem_at(error, f"{REPO}.parser.exclude[0]")


def test_recursive_yaml_does_not_hang(site: Path) -> None:
    text = one_tenant(repo_body(parser=parser_body(exclude="&r [*r]")))
    error = load_error(write_tenants(site, text))
    assert "must be a string" in problem_at(error, f"{REPO}.parser.exclude[0]").message


# --------------------------------------------------------------------------- predicates


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("../repos/plain", "../repos/plain"),
        ("${NEO_HOME}", "/h"),
        ("${NEO_HOME}/examples/${NEO_HOME}", "/h/examples//h"),
        ("~/x", "~/x"),  # '~' is the path rule's, not this one's
        ("a$$b", "a$b"),
        ("$$${NEO_HOME}", "$/h"),
        ("$${NEO_HOME}", "${NEO_HOME}"),  # an escaped '$' starts no reference
    ],
)
def test_expand_path_variables(text: str, expected: str) -> None:
    assert expand_path_variables(text, {"NEO_HOME": "/h"}.__getitem__) == expected


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("${HOME}/x", ("unknown variable ${HOME}", "write '~'")),
        ("${NEO_HOM}/x", ("unknown variable ${NEO_HOM}", "did you mean ${NEO_HOME}?")),
        ("${a b}/x", ("unknown variable '${a b}'",)),
        ("${}/x", ("empty variable reference ${}",)),
        ("${NEO_HOME/x", ("unclosed variable reference '${NEO_HOME/x'",)),
        ("$NEO_HOME/x", ("'$NEO_HOME'", "write ${NEO_HOME}")),
        ("x$", ("'$'", "'$$' for a literal '$'")),
        ("${A}/${B}", ("unknown variable ${A}", "unknown variable ${B}")),  # every one
    ],
)
def test_expand_path_variables_refuses_what_it_cannot_expand(
    text: str, fragments: tuple[str, ...]
) -> None:
    looked_up: list[str] = []
    with pytest.raises(PathVariableError) as caught:
        expand_path_variables(text, lambda name: looked_up.append(name) or "/h")
    for fragment in fragments:
        assert fragment in str(caught.value)
    assert looked_up == []


def test_expand_path_variables_reads_the_value_only_when_used() -> None:
    def unreadable(name: str) -> str:
        raise AssertionError(f"read {name}")

    assert expand_path_variables("/srv/repos/a", unreadable) == "/srv/repos/a"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("acme", True),
        ("a", True),
        ("0", True),
        ("a-b-", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("acme\n", False),  # re.match + "$" would accept this one
        ("\nacme", False),
        (" acme", False),
        ("acme ", False),
        ("-acme", False),
        ("Acme", False),
        ("ac_me", False),
        ("", False),
        (f"{CYRILLIC_A}cme", False),
        (f"acme{FULLWIDTH_ONE}", False),
        ("\u0661", False),  # ARABIC-INDIC DIGIT ONE: \d without re.ASCII would accept it
        (1, False),
        (None, False),
        (True, False),
    ],
)
def test_is_valid_id(value: object, expected: bool) -> None:
    assert is_valid_id(value) is expected


def test_id_pattern_is_the_documented_one() -> None:
    assert ID_PATTERN == "^[a-z0-9][a-z0-9-]{0,62}$"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1.0.0", True),
        ("0.0.0", True),
        ("10.20.30", True),
        ("1.0.0-alpha", True),
        ("1.0.0-alpha.1", True),
        ("1.0.0-0.3.7", True),
        ("1.0.0+build.1", True),
        ("1.0.0-rc.1+build.5", True),
        ("1.0", False),
        ("1", False),
        ("v1.0.0", False),
        ("01.0.0", False),
        ("1.0.0-01", False),
        ("1.0.0-", False),
        ("1.0.0+", False),
        ("1.0.0\n", False),
        (" 1.0.0", False),
        ("1.0.\u0661", False),
        ("1." + "1" * 200 + ".0", False),
        (1.0, False),
    ],
)
def test_is_semver(value: object, expected: bool) -> None:
    assert is_semver(value) is expected


# --------------------------------------------------------------------------- declaration


def test_to_plain_is_canonical_and_feeds_the_digests(site: Path) -> None:
    text_a = """\
tenants:
  - id: acme
    repos:
      - {slug: b, path: ../repos/plain, parser: {id: neo-code, version: 1.0.0, exclude: [y, x, x]}}
      - {slug: a, path: ../repos/git, ref: main, cadence_minutes: 5,
         parser: {id: neo-code, version: 1.0.0}}
"""
    # Same declaration: repos and exclude globs reordered, keys in another order.
    text_b = """\
tenants:
  - repos:
      - {parser: {version: 1.0.0, id: neo-code}, cadence_minutes: 5, ref: main,
         path: ../repos/git, slug: a}
      - {path: ../repos/plain, slug: b, parser: {exclude: [x, y], id: neo-code, version: 1.0.0}}
    id: acme
"""
    tenant_a = load_tenants(write_tenants(site, text_a, "a.yaml")).tenants[0]
    tenant_b = load_tenants(write_tenants(site, text_b, "b.yaml")).tenants[0]
    assert tenant_a.to_plain() == {
        "id": "acme",
        "repos": [
            {
                "slug": "a",
                "path": str((site / "repos" / "git").resolve()),
                "ref": "main",
                "parser": {"id": "neo-code", "version": "1.0.0", "exclude": []},
                "cadence_minutes": 5,
            },
            {
                "slug": "b",
                "path": str((site / "repos" / "plain").resolve()),
                "ref": None,
                "parser": {"id": "neo-code", "version": "1.0.0", "exclude": ["x", "y"]},
                "cadence_minutes": None,
            },
        ],
    }
    assert tenant_a.to_plain() == tenant_b.to_plain()
    assert tenant_a.declaration_digest() == tenant_b.declaration_digest()
    assert tenant_a.declaration_digest() == declaration_digest(tenant_a.to_plain())
    repo = tenant_a.repo("a")
    assert repo is not None
    assert repo.declaration_digest() == repo_declaration_digest(repo.to_plain())


def test_a_declaration_change_changes_the_tenant_digest(site: Path) -> None:
    base = load_tenants(write_tenants(site, one_tenant(), "base.yaml")).tenants[0]
    bumped = load_tenants(
        write_tenants(site, one_tenant(repo_body(parser=parser_body(version="1.0.1"))), "bump.yaml")
    ).tenants[0]
    assert base.declaration_digest() != bumped.declaration_digest()
    assert base.repos[0].declaration_digest() != bumped.repos[0].declaration_digest()


def test_the_models_declare_the_documented_keys() -> None:
    # Messages list a mapping's allowed keys from its model; the rules name them too.
    assert tuple(TopModel.model_fields) == TOP_LEVEL_KEYS
    assert tuple(TenantModel.model_fields) == TENANT_KEYS
    assert tuple(RepoModel.model_fields) == REPO_KEYS
    assert tuple(ParserModel.model_fields) == PARSER_KEYS
