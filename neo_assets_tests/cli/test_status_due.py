"""``neo-assets status --json`` says per repo whether it is due (the sweep sensor's own
rule) and whether the knowledge base is behind it, with the reason: real sweeps of real
git repos, a real commit after, a real ``neo-assets`` subprocess."""

import json

import pytest

from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.serve.service_harness import ServedKb


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> ServedKb:
    return ServedKb.build(tmp_path_factory.mktemp("status-kb"))


def status(kb: ServedKb) -> dict[tuple[str, str], dict]:
    done = kb.cli("status", "--json")
    assert done.returncode == 0, done.stderr
    return {(r["tenantId"], r["repoSlug"]): r for r in json.loads(done.stdout)["repos"]}


def test_status_says_due_and_behind_with_the_reason(kb: ServedKb) -> None:
    widgets = GitRepo(kb.root / "acme-widgets", init=False)
    indexed = widgets.head()
    before = status(kb)[("acme", "widgets")]
    assert (before["due"], before["behind"], before["behindReason"]) == (False, False, None)
    assert before["headRevision"] == indexed
    widgets.write("widgets/more.py", "def more():\n    return 2\n")
    moved = widgets.commit("more", when=1_700_000_500)
    after = status(kb)
    row = after[("acme", "widgets")]
    assert row["due"] is True and row["dueReason"] == "revision-moved"
    assert row["behind"] is True and row["headRevision"] == moved
    assert row["behindReason"] == f"head moved from {indexed[:12]} to {moved[:12]}"
    assert after[("acme", "gadgets")]["behind"] is False
    assert after[("acme", "gadgets")]["due"] is False
