"""Related-chunk links end to end: real git history with chosen commit times, real sweeps
through Dagster, the links in the ledger, and ``query --expand`` scoped by tenant."""

import asyncio
import itertools
import json
import re
from pathlib import Path

import dagster as dg
import numpy as np
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from neo_assets.cli.app import app
from neo_assets.cli.launch import run_sweeps
from neo_assets.config.settings import load_settings
from neo_assets.links.store import link_set, neighbours, repo_links
from neo_assets.query.one_shot import run_query
from neo_assets.services.handles import open_ledger, open_store
from neo_assets.store.ledger_schema import chunk_links
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import KbHandles
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

HOUR = 3600.0
T1 = 1_700_000_000.0 + 3 * 86_400.0  # calc_a.py's commit

PRICE = (
    "def total_price(items):\n"
    "    total = 0\n"
    "    for item in items:\n"
    "        total += item.price * item.quantity\n"
    "    return total\n"
)
# Almost the same function: a semantic neighbour of total_price.
COST = (
    "def total_cost(items):\n"
    "    total = 0\n"
    "    for item in items:\n"
    "        total += item.price * item.quantity\n"
    "    return round(total, 2)\n"
)
COST_V2 = COST.replace("total_cost", "total_cost_rounded")
LEGACY = "def legacy_banner(name):\n    print('Welcome to', name.upper())\n"
EARLY = "def early_helper(path):\n    with open(path) as fh:\n        return fh.readlines()\n"
NOTES = "# Notes\n\nPrices include tax.\n\n## Shipping\n\nShipping is free above 50.\n"

# (commit time, files): legacy 3 days before calc_a (outside the window), early 23 h before
# (inside, at the weight floor), calc_b and the notes 6 h after.
HISTORY = [
    (1_700_000_000.0, {"old.py": LEGACY}),
    (T1 - 23 * HOUR, {"early.py": EARLY}),
    (T1, {"calc_a.py": PRICE}),
    (T1 + 6 * HOUR, {"calc_b.py": COST, "notes.md": NOTES}),
]


def _repo(path: Path) -> GitRepo:
    repo = GitRepo(path)
    for when, files in HISTORY:
        for rel, text in files.items():
            repo.write(rel, text)
        repo.commit(f"at {when}", when=when)
    return repo


@pytest.fixture
def env(neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "dagster").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster"))
    state = {"tmp": tmp_path, "instance": instance, "monkeypatch": monkeypatch}
    yield state
    instance.dispose()


def _declare(env: dict, tenants: dict[str, list[dict]]) -> Path:
    path = write_tenants(env["tmp"] / "tenants.yaml", tenants)
    env["monkeypatch"].setenv("NEO_TENANTS_FILE", str(path))
    return path


def _sweep(env: dict, tenants_path: Path) -> list[dict]:
    results = run_sweeps(load_settings(), load_tenants(tenants_path), env["instance"])
    assert {r["outcome"] for r in results} == {"complete"}, results
    return results


def _ids_by_name(tenant: str, repo: str) -> dict[str, str]:
    with open_ledger(load_settings()) as ledger:
        return {c.name: c.chunk_id for c in ledger.declared_chunks(tenant, repo)}


def _links(tenant: str, repo: str, kind: str) -> dict[tuple[str, str], float]:
    with open_ledger(load_settings()) as ledger:
        rows = repo_links(ledger, tenant, repo)
    return {(r.chunk_id, r.neighbour_id): r.weight for r in rows if r.link_kind == kind}


def _named(links: dict[tuple[str, str], float], ids: dict[str, str]) -> dict:
    names = {v: k for k, v in ids.items()}
    return {(names[a], names[b]): round(w, 6) for (a, b), w in links.items()}


def _all_pairs_cosine(ids: dict[str, str], threshold: float) -> dict[tuple[str, str], float]:
    """Every ordered pair of the repo's rows above the threshold, by brute force."""
    with open_store(load_settings()) as store:
        got = store.collection.get(ids=list(ids.values()), include=["embeddings"])
    names = {v: k for k, v in ids.items()}
    vectors = {
        names[i]: np.asarray(e, dtype=np.float64)
        for i, e in zip(got["ids"], got["embeddings"], strict=True)
    }
    out = {}
    for a, b in itertools.permutations(sorted(vectors), 2):
        va, vb = vectors[a], vectors[b]
        cos = float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))
        if cos > threshold:
            out[(a, b)] = cos
    return out


def _latest_links_metadata(instance: dg.DagsterInstance, partition: str) -> dict:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("chunk_links"), asset_partitions=[partition]),
        limit=1,
    ).records
    assert records, partition
    return {k: v.value for k, v in records[0].asset_materialization.metadata.items()}


def test_sweep_stores_temporal_and_semantic_links_then_replaces_them(env: dict) -> None:
    repo = _repo(env["tmp"] / "widgets")
    tenants = _declare(env, {"acme": [repo_entry("widgets", repo.path)]})
    _sweep(env, tenants)

    ids = _ids_by_name("acme", "widgets")
    assert {"total_price", "total_cost", "legacy_banner", "early_helper", "Notes"} <= set(ids)
    assert "Notes > Shipping" in ids
    # Temporal: only same-kind chunks of files changed within 24 h, weight max(0.3, 1-gap/24h).
    assert _named(_links("acme", "widgets", "temporal"), ids) == {
        ("total_price", "total_cost"): 0.75,
        ("total_cost", "total_price"): 0.75,
        ("total_price", "early_helper"): 0.3,  # 23 h apart: 1 - 23/24 floors at 0.3
        ("early_helper", "total_price"): 0.3,
        ("Notes", "Notes > Shipping"): 1.0,  # same commit; sections never link to functions
        ("Notes > Shipping", "Notes"): 1.0,
    }
    # Semantic: exactly the pairs above the threshold, by the rows' own embeddings.
    semantic = _named(_links("acme", "widgets", "semantic"), ids)
    expected = _all_pairs_cosine(ids, load_settings().links.semantic_threshold)
    assert ("total_price", "total_cost") in expected and ("total_cost", "total_price") in expected
    assert ("total_price", "legacy_banner") not in expected
    assert set(semantic) == set(expected)
    assert all(abs(semantic[p] - expected[p]) < 1e-5 for p in expected)
    assert all(a != b for a, b in semantic)  # never to self

    meta = _latest_links_metadata(env["instance"], "acme/widgets")
    assert meta["stored"] is True
    assert meta["temporal_links"] == 6 and meta["semantic_links"] == len(expected)
    assert meta["temporal_linked_chunks"] == 5  # price, cost, early and both sections
    linked = {a for a, _ in _links("acme", "widgets", "temporal")} | {
        a for a, _ in _links("acme", "widgets", "semantic")
    }
    assert meta["linked_chunks"] == len(linked)
    per_chunk = {}
    for a, _ in [*_links("acme", "widgets", "temporal"), *_links("acme", "widgets", "semantic")]:
        per_chunk[a] = per_chunk.get(a, 0) + 1
    assert meta["max_links_per_chunk"] == max(per_chunk.values())
    assert meta["temporal_max_per_chunk"] == 2  # total_price: total_cost and early_helper
    assert meta["rows"] == meta["declared_chunks"] == len(ids)
    assert isinstance(meta["links_seconds"], float) and meta["links_seconds"] >= 0
    assert meta["dagster/row_count"] == 6 + len(expected)
    head = repo.head()
    with open_ledger(load_settings()) as ledger:
        assert link_set(ledger, "acme", "widgets")["revision"] == head

    # The repo changes: calc_b.py's function is renamed 10 h after calc_a.py.
    old_cost = ids["total_cost"]
    repo.write("calc_b.py", COST_V2)
    repo.commit("rename", when=T1 + 10 * HOUR)
    _sweep(env, tenants)
    ids2 = _ids_by_name("acme", "widgets")
    assert old_cost not in ids2.values() and "total_cost_rounded" in ids2
    temporal2 = _named(_links("acme", "widgets", "temporal"), ids2)
    assert temporal2 == {
        ("total_price", "total_cost_rounded"): round(1 - 10 / 24, 6),
        ("total_cost_rounded", "total_price"): round(1 - 10 / 24, 6),
        ("total_price", "early_helper"): 0.3,
        ("early_helper", "total_price"): 0.3,
        ("Notes", "Notes > Shipping"): 1.0,
        ("Notes > Shipping", "Notes"): 1.0,
    }
    with open_ledger(load_settings()) as ledger:
        every = repo_links(ledger, "acme", "widgets")
    assert old_cost not in {r.chunk_id for r in every} | {r.neighbour_id for r in every}
    semantic2 = _named(_links("acme", "widgets", "semantic"), ids2)
    assert set(semantic2) == set(_all_pairs_cosine(ids2, load_settings().links.semantic_threshold))
    assert ("total_price", "total_cost_rounded") in semantic2
    with open_ledger(load_settings()) as ledger:
        assert link_set(ledger, "acme", "widgets")["revision"] == repo.head()


def test_query_expand_adds_neighbours_of_the_hits_tenant_only(env: dict, kb: KbHandles) -> None:
    a = _repo(env["tmp"] / "acme-widgets")
    b = _repo(env["tmp"] / "globex-tools")  # identical files at identical times
    tenants = _declare(
        env, {"acme": [repo_entry("widgets", a.path)], "globex": [repo_entry("tools", b.path)]}
    )
    _sweep(env, tenants)
    acme, globex = _ids_by_name("acme", "widgets"), _ids_by_name("globex", "tools")
    assert set(acme) == set(globex) and not set(acme.values()) & set(globex.values())

    settings = load_settings()
    store, ledger = kb.store, kb.ledger

    def query(tenant: str, text: str, **kw) -> dict:
        return asyncio.run(
            run_query(settings, store, ledger, text, tenant=tenant, repo=None, k=3, **kw)
        )

    plain = query("acme", "total_price items price quantity")
    assert all("expanded" not in r for r in plain["results"])

    for tenant, own, other in (("acme", acme, globex), ("globex", globex, acme)):
        doc = query(tenant, "total_price items price quantity", expand=True)
        top = doc["results"][0]
        assert {"id", "score", "document", "metadata"} <= set(top)
        assert top["id"] == own["total_price"]
        got = {(n["id"], n["linkKind"]) for n in top["expanded"]}
        # total_cost is both a temporal (0.75) and a semantic neighbour: its stronger link wins.
        assert own["total_cost"] in {i for i, _ in got} and own["early_helper"] in {
            i for i, _ in got
        }
        assert (own["early_helper"], "temporal") in got
        for result in doc["results"]:
            assert result["metadata"]["tenantId"] == tenant
            for n in result["expanded"]:
                assert n["metadata"]["tenantId"] == tenant, n
                assert n["id"] in own.values() and n["id"] not in other.values()
                assert n["id"] != result["id"]
                assert n["linkKind"] in ("temporal", "semantic") and 0 < n["score"] <= 1.0
                assert n["document"]
        early = next(n for n in top["expanded"] if n["id"] == own["early_helper"])
        assert early["score"] == pytest.approx(0.3) and "early_helper" in early["document"]

    # Forged links that cross tenants never surface: one filed under the other tenant (the
    # ledger read is scoped), one filed under acme but pointing at a globex row (the row is
    # re-checked in the collection).
    own_row = (
        (chunk_links.c.tenant_id == "acme")
        & (chunk_links.c.chunk_id == acme["total_price"])
        & (chunk_links.c.link_kind == "semantic")
    )
    with ledger.engine.begin() as conn:
        kept = json.loads(conn.execute(sa.select(chunk_links.c.neighbours).where(own_row)).scalar())
        conn.execute(
            sa.insert(chunk_links).values(
                tenant_id="globex",
                repo_slug="tools",
                chunk_id=acme["total_price"],
                link_kind="semantic",
                neighbours=json.dumps([[globex["legacy_banner"], 0.999]]),
            )
        )
        conn.execute(
            sa.update(chunk_links)
            .where(own_row)
            .values(neighbours=json.dumps([[globex["total_cost"], 0.998], *kept]))
        )
    read = neighbours(ledger, "acme", [acme["total_price"]], limit=5)[acme["total_price"]]
    assert globex["legacy_banner"] not in {n.neighbour_id for n in read}
    assert globex["total_cost"] in {n.neighbour_id for n in read}  # planted: the query must drop it
    doc = query("acme", "total_price items price quantity", expand=True)
    for result in doc["results"]:
        for n in result["expanded"]:
            assert n["metadata"]["tenantId"] == "acme" and n["id"] not in globex.values()
    assert doc["results"][0]["expanded"]  # the real neighbours are still there

    # The CLI prints the neighbours under each hit; --json keeps the contract's keys.
    runner = CliRunner()
    human = runner.invoke(app, ["query", "total price items", "--tenant", "acme", "--expand"])
    assert human.exit_code == 0, human.output
    # Each line names path:startLine-endLine, kind and name (the hit's with its repo).
    assert re.search(r"early\.py:\d+-\d+ function early_helper", human.stderr), human.stderr
    assert "temporal 0.300" in human.stderr
    js = runner.invoke(app, ["query", "total price", "--tenant", "acme", "--expand", "--json"])
    assert js.exit_code == 0, js.output
    results = json.loads(js.stdout)["results"]
    assert results and all("expanded" in r for r in results)
