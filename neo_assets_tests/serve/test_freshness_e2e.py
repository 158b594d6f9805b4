"""Freshness on every answer, through a real service over real sweeps of real git repos:
each search result and each ``GET /v1/repos`` / MCP ``list_repos`` entry says the
revision it is indexed at, whether its repo's declared head has moved on since
(``behind``), that head, and since when (the head's commit time)."""

import time

import httpx
import pytest

from neo_assets.query.freshness import HEAD_TTL_S
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.serve.service_harness import ServedKb


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> ServedKb:
    return ServedKb.build(tmp_path_factory.mktemp("fresh-kb"))


def test_results_and_repos_say_whether_the_repo_moved_on(kb: ServedKb) -> None:
    headers = {"Authorization": f"Bearer {kb.issue('acme')['token']}"}
    widgets = GitRepo(kb.root / "acme-widgets", init=False)
    indexed = widgets.head()
    body = {"query": "dispatch_request", "k": 5, "repo": "widgets"}
    with kb.serve() as svc:
        hits = httpx.post(f"{svc.url}/v1/search", json=body, headers=headers).json()["results"]
        assert hits
        for h in hits:
            assert h["revision"] == indexed and h["behind"] is False
            assert h["head"] == indexed and h["behindSince"] is None
        repos = httpx.get(f"{svc.url}/v1/repos", headers=headers).json()["repos"]
        entry = {r["repoSlug"]: r for r in repos}["widgets"]
        assert (entry["revision"], entry["behind"], entry["head"]) == (indexed, False, indexed)

        widgets.write("widgets/more.py", "def more():\n    return 2\n")
        moved = widgets.commit("more", when=1_700_000_500)
        time.sleep(HEAD_TTL_S + 0.5)  # the head is cached that long
        hits = httpx.post(f"{svc.url}/v1/search", json=body, headers=headers).json()["results"]
        assert hits and all(
            (h["revision"], h["behind"], h["head"], h["behindSince"])
            == (indexed, True, moved, 1_700_000_500)
            for h in hits
        )
        repos = {
            r["repoSlug"]: r
            for r in httpx.get(f"{svc.url}/v1/repos", headers=headers).json()["repos"]
        }
        assert (repos["widgets"]["behind"], repos["widgets"]["head"]) == (True, moved)
        assert repos["widgets"]["revision"] == indexed
        assert repos["gadgets"]["behind"] is False
