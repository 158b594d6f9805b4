"""read_tenants: every problem attributed to its tenant block or repo entry, so a
mistake stays in its tenant (issue 33); real files, real directories."""

from pathlib import Path

import pytest

from neo_assets.tenants.validation import TenantsConfigError, load_tenants, read_tenants


@pytest.fixture
def dirs(tmp_path: Path) -> Path:
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    return tmp_path


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tenants.yaml"
    path.write_text(text.format(root=tmp_path))
    return path


GOOD_ACME = """\
tenants:
  - id: acme
    repos:
      - slug: widgets
        path: {root}/a
        parser: {{id: neo-code, version: 1.0.0}}
"""


def test_a_bad_repo_entry_is_its_own_and_its_siblings_and_other_tenants_load(dirs: Path) -> None:
    path = _write(
        dirs,
        GOOD_ACME
        + "      - slug: gadgets\n        path: {root}/gone\n"
        + "        parser: {{id: neo-code, version: 1.0.0}}\n"
        + "  - id: globex\n    repos:\n      - slug: tools\n        path: {root}/b\n"
        + "        parser: {{id: neo-code, version: 9.9.9}}\n",
    )
    reading = read_tenants(path)
    acme, globex = reading.blocks
    assert acme.tenant_id == "acme" and set(acme.repos) == {"widgets"} and not acme.problems
    ((problem,),) = acme.repo_problems.values()
    assert set(acme.repo_problems) == {"gadgets"} and problem.line == 8
    assert "does not exist" in problem.message
    assert globex.tenant_id == "globex" and set(globex.repo_problems) == {"tools"}
    assert globex.repo_problems["tools"][0].line == 14
    assert reading.readable and reading.file_problems == ()
    with pytest.raises(TenantsConfigError):  # the strict loader still refuses it all
        load_tenants(path)


def test_a_tenant_level_problem_is_the_tenants_and_a_bad_id_names_no_tenant(dirs: Path) -> None:
    path = _write(
        dirs,
        GOOD_ACME + "    cadence: 5\n  - id: Globex\n    repos: []\n",
    )
    acme, unnamed = read_tenants(path).blocks
    assert acme.tenant_id == "acme" and "unknown key" in acme.problems[0].message
    assert unnamed.tenant_id is None and "uppercase" in unnamed.problems[0].message


@pytest.mark.parametrize(
    ("bad_block", "words", "line"),
    [
        ("  - id: globex\n    id: initech\n    repos: []\n", "duplicate key", 8),
        (
            "  - id: globex\n    repos:\n      - slug: t\n        path: {root}/b\n"
            "        parser: {{id: neo-code, version: 1.0.0\n",
            "not closed",
            7,
        ),
    ],
)
def test_a_yaml_error_confined_to_one_block_is_that_tenants(
    dirs: Path, bad_block: str, words: str, line: int
) -> None:
    after = "  - id: hooli\n    repos:\n      - slug: app\n        path: {root}/c\n"
    after += "        parser: {{id: neo-code, version: 1.0.0}}\n"
    reading = read_tenants(_write(dirs, GOOD_ACME + bad_block + after))
    assert reading.readable
    acme, globex, hooli = reading.blocks
    assert set(acme.repos) == {"widgets"} and set(hooli.repos) == {"app"}
    assert globex.tenant_id == "globex" and not globex.repos
    (problem,) = globex.problems
    assert words in problem.message and problem.line == line
    assert [t.id for t in reading.tenants] == ["acme", "hooli"]


@pytest.mark.parametrize(
    "text",
    [
        "tenants: [\n",  # flow style: not confined to a block
        "tenant: x: y\n" + GOOD_ACME,  # the error is outside the list
        "- id: acme\n",  # not a mapping
        "",  # empty
    ],
)
def test_a_file_that_gives_no_tenant_is_unreadable_as_a_whole(dirs: Path, text: str) -> None:
    reading = read_tenants(_write(dirs, text))
    assert not reading.readable and reading.blocks == () and reading.file_problems
