"""A knowledge base swept before the counts were camelCase: its stored summaries (the
ledger's last_summary) are still read right by the due check, the status and the links
due check."""

import json
import time
from pathlib import Path

from neo_assets.config.settings import load_settings
from neo_assets.core import codes
from neo_assets.core.ids.config_digest import repo_declaration_digest
from neo_assets.generations.serving import configured_generation
from neo_assets.links.due import _embedded
from neo_assets.sources.revision import current_revision
from neo_assets.status.report import build_status
from neo_assets.sweep.due import declared_repos, evaluate
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import KbHandles
from neo_assets_tests.sweep.rules.test_summary import OLD_STYLE
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


def test_an_old_style_last_summary_is_read_by_due_status_and_links(
    kb: KbHandles, tmp_path: Path
) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.write("a.py", "def a():\n    return 1\n")
    repo.commit("a", when=1_700_000_000)
    tenants_file = write_tenants(tmp_path / "tenants.yaml", {"acme": [repo_entry("w", repo.path)]})
    tenants = load_tenants(tenants_file)
    ctxs = declared_repos(tenants)
    settings, decl, now = load_settings(), ctxs[0].repo, time.time()
    kb.ledger.upsert_repo_state(
        "acme",
        "w",
        last_outcome=codes.OUTCOME_FAILED,
        deferred_cause_code=codes.PARSE_FAILED,
        consecutive_failures=1,
        last_attempt_at=now - 5,
        attempt_inputs_at=now - 5,
        last_attempted_rev=current_revision(decl.path, decl.ref, decl.parser.exclude, 10**6),
        declaration_digest=repo_declaration_digest(decl.to_plain()),
        embedding_generation=configured_generation(settings),
        next_due_at=now + 3600,
        last_summary=json.dumps(OLD_STYLE, sort_keys=True),
    )
    (due,) = evaluate(ctxs, settings, kb.ledger, now)
    assert due.last_failure is not None
    assert due.last_failure.error == "acme/w: parser broke"
    (row,) = build_status(settings, tenants, kb.ledger, kb.store)["repos"]
    assert row["error"] == "acme/w: parser broke"
    assert _embedded(kb.ledger.repo_state("acme", "w")["last_summary"]) == 5
