"""A row stored before secrets were fenced (a knowledge base built by an older release,
or under older rules) is never served with its secret: search, get_chunk and related
chunks show each line that holds one redacted. Real sweep (the scan switched off to
make such a row), real Chroma, the query library."""

import asyncio
from pathlib import Path

import pytest

import neo_assets.sweep.secrets as sweep_secrets
from neo_assets.config.settings import load_settings
from neo_assets.query.rules.request import SearchRequest
from neo_assets.query.search import QueryService
from neo_assets.query.serving import Resident
from neo_assets.services.handles import open_ledger, open_store
from neo_assets.sweep.context import RepoContext
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import sweep_once
from neo_assets_tests.secrets import planted
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

CODE = (
    "def connect_to_warehouse():\n"
    f'    password = "{planted.PASSWORD_VALUE}"\n'
    f'    key = "{planted.AWS_KEY_ID}"\n'
    "    return open_warehouse_connection(password, key)\n"
)


def test_a_stored_row_holding_a_secret_is_served_redacted(
    neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = GitRepo(tmp_path / "r")
    repo.write("app/db.py", CODE)
    repo.commit("connect to the warehouse", when=1_700_000_000)
    path = write_tenants(
        tmp_path / "t.yaml", {"acme": [repo_entry("app", repo.path, version="2.0.0")]}
    )
    monkeypatch.setenv("NEO_TENANTS_FILE", str(path))
    tenant = load_tenants(path).tenants[0]
    with monkeypatch.context() as old_release:
        old_release.setattr(sweep_secrets, "scan", lambda text, path=None: [])
        assert sweep_once(RepoContext(tenant=tenant, repo=tenant.repos[0]))["outcome"] == (
            "complete"
        )
    settings = load_settings()
    with open_ledger(settings) as ledger, open_store(settings) as store:
        rows = store.get_rows(sorted(store.ids_where({"tenantId": "acme"})), include_documents=True)
        assert any(planted.AWS_KEY_ID in (r["document"] or "") for r in rows.values())
        service = QueryService(Resident(settings, store, ledger))
        found = asyncio.run(service.search("acme", SearchRequest(query="warehouse password")))
        hit = next(h for h in found["results"] if h["path"] == "app/db.py")
        chunk = service.chunk("acme", [], hit["id"])
    for shown in (hit["document"], chunk["document"]):
        assert planted.AWS_KEY_ID not in shown and planted.PASSWORD_VALUE not in shown
        assert "def connect_to_warehouse():" in shown and "[redacted:" in shown
