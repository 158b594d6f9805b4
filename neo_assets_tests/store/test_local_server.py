"""The local Chroma server every process on the default store shares (real processes,
real Chroma): started once, reused, restarted when its child dies, stopped when idle, and
never beside an embedded client of the same directory."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import chromadb
import numpy as np
import pytest

from neo_assets.config.settings import load_settings
from neo_assets.services.handles import StoreUnreachable, open_store
from neo_assets.store import local_server as ls
from neo_assets.store.local_server import ServerPaths


@pytest.fixture
def paths(tmp_path: Path) -> ServerPaths:
    found = ServerPaths.under(tmp_path / "home", tmp_path / "home" / "chroma")
    yield found
    ls.stop_local_server(found)


def _wait(predicate, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def _client(url: str) -> chromadb.HttpClient:
    address = url.rsplit(":", 1)
    return chromadb.HttpClient(host="127.0.0.1", port=int(address[1]))


def test_one_server_is_started_then_reused_and_serves_the_directory(paths: ServerPaths) -> None:
    url = ls.ensure_local_server(paths, idle_s=60)
    state = json.loads(paths.state_file.read_text())
    assert url == state["url"] and url.startswith("http://127.0.0.1:")
    assert ls.ensure_local_server(paths, idle_s=60) == url  # reused, not a second one
    assert json.loads(paths.state_file.read_text())["pid"] == state["pid"]
    assert (paths.chroma_dir / "chroma.sqlite3").exists()  # the directory under NEO_HOME
    assert f"{os.getpid()}-" in " ".join(p.name for p in paths.clients_dir.iterdir())
    assert oct(paths.state_file.stat().st_mode & 0o777) == "0o600"


def test_a_child_that_dies_is_restarted_and_clients_reconnect(paths: ServerPaths) -> None:
    url = ls.ensure_local_server(paths, idle_s=60)
    col = _client(url).get_or_create_collection("kept-rows")
    col.add(ids=["a"], embeddings=np.ones((1, 4), dtype=np.float32))
    child = json.loads(paths.state_file.read_text())["childPid"]
    os.kill(child, signal.SIGKILL)
    assert _wait(lambda: json.loads(paths.state_file.read_text())["childPid"] != child)
    again = ls.ensure_local_server(paths, idle_s=60)
    assert _client(again).get_collection("kept-rows").get(ids=["a"])["ids"] == ["a"]


def test_the_server_stops_once_no_client_process_lives(paths: ServerPaths) -> None:
    # A client process that opens the store and ends; the server outlives it by idle_s.
    code = (
        "import sys; from pathlib import Path; from neo_assets.store import local_server as ls;"
        "p = ls.ServerPaths(Path(sys.argv[1]), Path(sys.argv[2]));"
        "print(ls.ensure_local_server(p, idle_s=2))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(paths.chroma_dir), str(paths.state_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    state = json.loads(paths.state_file.read_text())
    assert done.stdout.strip() == state["url"]
    assert _wait(lambda: not paths.state_file.exists(), 30)
    assert _wait(lambda: ls.process_started(state["pid"]) is None, 15)
    assert ls.process_started(state["childPid"]) is None  # chroma went with it
    assert not ls.heartbeat(state["url"])


def test_an_embedded_client_and_the_server_never_share_the_directory(
    paths: ServerPaths,
) -> None:
    release = ls.hold_embedded(paths)
    with pytest.raises(ls.LocalServerError, match="exited at start"):
        ls.ensure_local_server(paths, idle_s=60)
    release()
    ls.ensure_local_server(paths, idle_s=60)
    with pytest.raises(ls.LocalServerError, match="served by a local Chroma server"):
        ls.hold_embedded(paths)


def test_the_store_opens_through_the_local_server_by_default(
    neo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NEO_CHROMA_LOCAL")
    settings = load_settings()
    paths = ServerPaths.under(settings.store.home_dir, settings.store.chroma_dir)
    try:
        with open_store(settings) as store:
            store.add(["x" * 64], np.ones((1, 8)), ["doc"], [{"tenantId": "t"}])
        state = json.loads(paths.state_file.read_text())
        # Another process reads what this one wrote, through the same server.
        code = (
            "from neo_assets.config.settings import load_settings;"
            "from neo_assets.services.handles import open_store;"
            "s = open_store(load_settings()); print(s.count()); s.close()"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
        assert done.stdout.strip() == "1", done.stderr[-2000:]
        assert json.loads(paths.state_file.read_text())["pid"] == state["pid"]
    finally:
        ls.stop_local_server(paths)


def test_a_server_that_cannot_start_is_one_line_naming_the_log(
    neo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NEO_CHROMA_LOCAL")
    settings = load_settings()
    paths = ServerPaths.under(settings.store.home_dir, settings.store.chroma_dir)
    release = ls.hold_embedded(paths)  # another process's embedded client, say
    try:
        with pytest.raises(StoreUnreachable) as caught:
            open_store(settings)
        message = str(caught.value)
        assert str(paths.log_file) in message and "\n" not in message
    finally:
        release()


def test_a_directory_written_embedded_is_served_by_the_local_server(
    neo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What an older build left under NEO_HOME (embedded Chroma) is what the server serves.
    settings = load_settings()
    with open_store(settings) as store:  # NEO_CHROMA_LOCAL=embedded (the suite's default)
        store.add(["b" * 64], np.ones((1, 8)), ["kept"], [{"tenantId": "t"}])
    monkeypatch.delenv("NEO_CHROMA_LOCAL")
    paths = ServerPaths.under(settings.store.home_dir, settings.store.chroma_dir)
    try:
        with open_store(load_settings()) as store:
            assert store.get_rows(["b" * 64], include_documents=True)["b" * 64]["document"] == (
                "kept"
            )
            assert paths.state_file.exists()
    finally:
        ls.stop_local_server(paths)
