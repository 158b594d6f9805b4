"""services/declaration: the declaration in force from a real file and a real ledger."""

import os
from pathlib import Path

import pytest

from neo_assets.config.settings import load_settings
from neo_assets.declaration.in_force import load_declaration, warning_lines
from neo_assets.declaration.records import last_good_declarations, record_good_declaration
from neo_assets.services.handles import open_ledger
from neo_assets.tenants.validation import TenantsConfigError
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


@pytest.fixture
def setup(neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    tenants = tmp_path / "tenants.yaml"
    monkeypatch.setenv("NEO_TENANTS_FILE", str(tenants))
    return tenants, tmp_path


def _write(tenants: Path, root: Path, version: str, mtime: int) -> None:
    write_tenants(tenants, {"acme": [repo_entry("w", root / "a", version=version)]})
    os.utime(tenants, ns=(mtime, mtime))  # a new stamp, as an edit gives


def test_a_file_changed_back_is_recorded_again_as_the_last_good_one(setup) -> None:
    tenants, root = setup
    settings = load_settings()
    _write(tenants, root, "1.0.0", 1_000_000_000)
    load_declaration(settings)
    with open_ledger(settings) as ledger:
        assert last_good_declarations(ledger)["acme"]["repos"][0]["parser"]["version"] == "1.0.0"
        # Another process records 2.0.0 while this one does not look...
        plain = {"id": "acme", "repos": [repo_entry("w", root / "a", version="2.0.0")]}
        record_good_declaration(ledger, "acme", "f" * 64, plain, 2.0)
    # ...and the file is back at 1.0.0: read again, it is the last good one again.
    _write(tenants, root, "1.0.0", 3_000_000_000)
    load_declaration(settings)
    # Now broken: the repo's last good declaration is the 1.0.0 one the file last said.
    _write(tenants, root, "9.9.9", 4_000_000_000)
    held = load_declaration(settings)
    assert held.tenant("acme").repo("w").parser.version == "1.0.0"
    (entry,) = held.misdeclared
    assert (entry.tenant_id, entry.repo_slug) == ("acme", "w")
    lines = warning_lines(held)
    assert lines[0].startswith("repo acme/w is misdeclared") and "9.9.9" in lines[1]


def test_nothing_to_stand_in_is_refused_as_before(setup) -> None:
    tenants, root = setup
    _write(tenants, root, "9.9.9", 1_000_000_000)
    with pytest.raises(TenantsConfigError, match="9.9.9"):
        load_declaration(load_settings())
