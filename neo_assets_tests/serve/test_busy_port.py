"""``neo-assets serve`` on a port another process listens on: one line naming the address
and the setting to change, exit 2, before anything heavy starts (no "ready", no crash).
A real ``neo-assets serve`` subprocess against a real listening socket."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from neo_assets_tests.serve.service_harness import ROOT
from neo_assets_tests.servers import LOOPBACK
from neo_assets_tests.tenantfiles import repo_entry, write_tenants


@pytest.mark.parametrize("via", ["flag", "env"])
def test_serve_on_a_busy_port_names_the_address_and_the_setting(tmp_path: Path, via: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind((LOOPBACK, 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("NEO_")}
        (tmp_path / "code").mkdir()
        (tmp_path / "code" / "a.py").write_text("def a():\n    return 1\n")
        tenants = write_tenants(
            tmp_path / "tenants.yaml", {"acme": [repo_entry("code", tmp_path / "code")]}
        )
        env |= {
            "NEO_HOME": str(tmp_path / "home"),
            "DAGSTER_HOME": str(tmp_path / "dagster"),
            "NEO_TENANTS_FILE": str(tenants),
        }
        args = [sys.executable, "-m", "neo_assets.cli", "serve", "--host", LOOPBACK]
        if via == "flag":
            args += ["--port", str(port)]
        else:
            env["NEO_SERVE_PORT"] = str(port)
        done = subprocess.run(
            args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
        )
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert f"{LOOPBACK}:{port}" in lines[0]
    assert "--port" in lines[0] and "NEO_SERVE_PORT" in lines[0]
    assert "ready" not in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "home" / "chroma").exists()  # nothing heavy was opened
