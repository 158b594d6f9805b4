"""``/readyz`` against a real service (``neo-assets serve`` on loopback) over a real
knowledge base: ready when the store, ledger and provider answer; started with its Chroma
directory gone while the ledger records the repos swept complete, it is not ready (503
naming the missing store) and searches answer 503 with that code instead of an empty
success; ``/healthz`` stays 200 (liveness)."""

import shutil
from pathlib import Path

import httpx
import pytest

from neo_assets.core import codes
from neo_assets_tests.serve.service_harness import ServedKb


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> ServedKb:
    return ServedKb.build(tmp_path_factory.mktemp("ready-kb"))


def test_ready_then_not_ready_when_the_chroma_directory_is_gone(kb: ServedKb) -> None:
    token = kb.issue("acme")["token"]
    headers = {"Authorization": f"Bearer {token}"}
    body = {"query": "dispatch_request", "k": 3}
    with kb.serve() as svc:
        r = httpx.get(f"{svc.url}/readyz", timeout=30)
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "ready"
        assert {n: c["ok"] for n, c in r.json()["checks"].items()} == {
            "store": True,
            "ledger": True,
            "provider": True,
        }
        assert httpx.post(f"{svc.url}/v1/search", json=body, headers=headers).json()["results"]
    chroma = Path(kb.env["NEO_HOME"]) / "chroma"
    shutil.move(chroma, chroma.with_name("chroma.moved"))
    try:
        with kb.serve() as svc:
            assert httpx.get(f"{svc.url}/healthz", timeout=30).status_code == 200
            r = httpx.get(f"{svc.url}/readyz", timeout=30)
            assert r.status_code == 503, r.text
            doc = r.json()
            assert doc["failed"] == ["store"]
            store = doc["checks"]["store"]
            assert store["code"] == codes.QUERY_STORE_MISSING
            assert "acme/widgets" in store["message"] and "globex/vault" in store["message"]
            assert str(chroma) in store["message"] and "sweep --force" in store["message"]
            s = httpx.post(f"{svc.url}/v1/search", json=body, headers=headers, timeout=30)
            assert s.status_code == 503, s.text
            error = s.json()["error"]
            assert error["code"] == codes.QUERY_STORE_MISSING
            assert "acme/widgets" in error["message"] and "globex" not in error["message"]
            assert "Traceback" not in svc.log()
    finally:
        shutil.rmtree(chroma, ignore_errors=True)
        shutil.move(chroma.with_name("chroma.moved"), chroma)
