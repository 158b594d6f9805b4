"""Tokens with a life (issue 36 item 4), against the real service on loopback: an expired
token is refused; a token whose tenant left tenants.yaml is revoked for good (declaring
the tenant again does not bring it back); a token in the URL is refused with 400 and never
reaches the access log; the CLI's --expires is checked and recorded."""

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from neo_assets.core import codes
from neo_assets.serve.rules.tokens import TokenRecord, parse_life, token_in_query, verify
from neo_assets_tests.serve.service_harness import ROOT, Served, ServedKb


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedKb]:
    built = ServedKb.build(tmp_path_factory.mktemp("token-life"))
    yield built
    built.stop_store()


def _search(served: Served, token: str) -> httpx.Response:
    return httpx.post(
        f"{served.url}/v1/search",
        json={"query": "dispatch a request", "k": 3},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


def _issue_with_life(kb: ServedKb, tenant: str, life_s: float) -> str:
    from neo_assets.config.settings import load_settings
    from neo_assets.serve.tokens import issue_token
    from neo_assets.services.handles import open_ledger

    with kb.environment(), open_ledger(load_settings()) as ledger:
        _record, token = issue_token(ledger, tenant, [], "short", time.time(), life_s)
    return token


def test_the_rules_of_a_tokens_life() -> None:
    record = TokenRecord("a" * 16, "h", "acme", (), "", 0.0, None, expires_at=100.0)
    assert parse_life("30d") == 30 * 86_400 and parse_life("90m") == 5_400
    for bad in ("30", "0d", "3x", "-1d", "99999999d"):
        with pytest.raises(ValueError, match="--expires"):
            parse_life(bad)
    assert token_in_query([("q", "x"), ("access_token", "anything")]) == "access_token"
    assert token_in_query([("q", "neo_" + "0" * 16 + "_" + "A" * 43)]) == "q"
    assert token_in_query([("q", "neo tokens"), ("limit", "5")]) is None
    # verify() is exercised through the service below; the expiry rule itself:
    assert verify(None, {}, 0.0).code == codes.AUTH_MISSING_TOKEN
    assert record.public()["expiresAt"] == 100.0


def test_an_expired_token_is_refused(kb: ServedKb) -> None:
    with kb.serve() as served:
        token = _issue_with_life(kb, "acme", 2.0)
        assert _search(served, token).status_code == 200
        time.sleep(2.5)
        late = _search(served, token)
        assert late.status_code == 401
        assert late.json()["error"]["code"] == codes.AUTH_EXPIRED_TOKEN


def test_a_removed_tenants_token_stays_revoked_when_the_id_comes_back(kb: ServedKb) -> None:
    token = kb.issue("globex", name="globex agent")["token"]
    tenants_path = Path(kb.env["NEO_TENANTS_FILE"])
    original = tenants_path.read_text()
    with kb.serve() as served:
        assert _search(served, token).status_code == 200
        # globex leaves the declaration (the block is the file's last one).
        assert "\n- id: globex\n" in original
        tenants_path.write_text(original.split("- id: globex")[0])
        time.sleep(1.5)  # the service re-reads the file when it changes
        gone = _search(served, token)
        assert gone.status_code == 401
        assert gone.json()["error"]["code"] == codes.AUTH_REVOKED_TOKEN
        assert "no longer declared" in gone.json()["error"]["message"]
        # A tenant declared again under the same id is another tenant.
        tenants_path.write_text(original)
        time.sleep(1.5)
        assert _search(served, token).status_code == 401
    listed = json.loads(kb.cli("token", "list", "--json").stdout)["tokens"]
    mine = next(t for t in listed if t["name"] == "globex agent")
    assert mine["revokedAt"] is not None and "removed" in mine["revokedReason"]


def test_a_token_in_the_url_is_refused_and_never_logged(kb: ServedKb) -> None:
    token = kb.issue("acme")["token"]
    with kb.serve() as served:
        for url in (
            f"{served.url}/v1/repos?access_token={token}",
            f"{served.url}/v1/chunks/{'a' * 64}?t={token}",
            f"{served.url}/healthz?token=x",
        ):
            got = httpx.get(url, timeout=30)
            assert got.status_code == 400, (url, got.text)
            assert got.json()["error"]["code"] == codes.AUTH_TOKEN_IN_URL
        assert _search(served, token).status_code == 200
        time.sleep(0.5)
        log = served.log()
    secret = token.split("_", 2)[2]
    assert secret not in log and "access_token" not in log


def test_token_issue_checks_and_records_expires(kb: ServedKb) -> None:
    bad = kb.cli("token", "issue", "--tenant", "acme", "--expires", "soon", "--json")
    assert bad.returncode == 2 and "--expires" in bad.stderr and "Traceback" not in bad.stderr
    done = kb.cli("token", "issue", "--tenant", "acme", "--expires", "30d", "--json")
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    assert doc["expiresAt"] == pytest.approx(time.time() + 30 * 86_400, abs=120)


def test_a_read_only_ledger_is_one_line_for_issue_and_revoke(kb: ServedKb) -> None:
    ledger = Path(kb.env["NEO_HOME"]) / "ledger.sqlite"
    read_only = {"NEO_LEDGER_URL": f"sqlite:///file:{ledger}?mode=ro&uri=true"}
    token_id = kb.issue("acme")["id"]
    for args in (("token", "issue", "--tenant", "acme"), ("token", "revoke", token_id)):
        done = kb.cli_env(read_only, *args)
        assert done.returncode == 2, done.stderr
        said = " ".join(done.stderr.split())  # one message, wrapped to the terminal
        assert "refused the write" in said and "nothing was changed" in said
        assert "Traceback" not in done.stderr and said.count("error:") == 1
    assert os.access(ledger, os.R_OK)
    # The URI's file, not a "file:" folder made in the working directory.
    assert not (ROOT / "file:").exists()
