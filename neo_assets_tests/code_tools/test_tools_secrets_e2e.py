"""The code tools never serve a secret: the sweep fences the chunks that hold one, and a
file read, a grep or a reference's line shows each line that holds a secret redacted (a
private key from its BEGIN to its END line), line numbers kept. A real git repo swept,
``serve`` in a subprocess, httpx."""

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from neo_assets_tests.secrets import planted
from neo_assets_tests.serve.service_harness import Served, ServedKb

SETTINGS = (
    "import os\n\n"
    f'AWS_ACCESS_KEY_ID = "{planted.AWS_KEY_ID}"\n'
    f'DATABASE_URL = "{planted.DATABASE_URL}"\n\n\n'
    "def connect(url=DATABASE_URL):\n"
    "    return os.environ.get('DB', url)\n\n\n"
    f'SIGNING_KEY = """{planted.PRIVATE_KEY}"""\n'
)
REPOS = {("acme", "app"): {"app/settings.py": SETTINGS}}
SECRETS = [planted.AWS_KEY_ID, planted.DB_PASSWORD, *planted.RSA_BODY.split("\n")]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, str]]:
    kb = ServedKb.build(tmp_path_factory.mktemp("tools-secrets"), REPOS)
    token = kb.issue("acme")["token"]
    with kb.serve() as svc:
        yield svc, token


def tool(served: tuple[Served, str], name: str, **body: Any) -> dict[str, Any]:
    svc, token = served
    r = httpx.post(f"{svc.url}/v1/{name}", json=body, headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    return r.json()


def test_read_file_shows_secret_lines_redacted_and_everything_else(served) -> None:
    got = tool(served, "read_file", repo="app", path="app/settings.py")
    text = got["text"]
    for secret in SECRETS:
        assert secret not in text
    lines = text.split("\n")
    assert lines[0] == "import os"
    assert "def connect(url=DATABASE_URL):" in lines  # the code around stays readable
    assert lines[2].startswith("[redacted: this line holds a secret")
    assert len(lines) == len(SETTINGS.rstrip("\n").split("\n"))  # numbering kept


def test_grep_finds_no_secret_but_still_finds_the_code(served) -> None:
    for pattern in (
        planted.AWS_KEY_ID,
        "AKIA",
        planted.DB_PASSWORD,
        "BEGIN RSA",
        "[A-Za-z0-9+/]{40,}",
    ):
        found = tool(served, "grep", pattern=pattern)
        assert all(s not in str(found) for s in SECRETS), pattern
        assert not [m for m in found["matches"] if "redacted" not in m["text"]], (pattern, found)
    code = tool(served, "grep", pattern=r"def connect")
    assert [m["line"] for m in code["matches"]] == [7]
