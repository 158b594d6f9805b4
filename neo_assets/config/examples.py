"""Turn the shipped sample tree into a real git repository under $NEO_HOME (make run).

Idempotent: an existing sample repository is left as it is, so the second `make run`
sweeps nothing new.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from neo_assets.config.settings import PACKAGE_DIR, load_settings
from neo_assets.store.private_files import owner_only_umask, private_dir, private_tree

SAMPLE_SOURCE = PACKAGE_DIR.parent / "examples" / "sample-widgets"
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "neo-assets example",
    "GIT_AUTHOR_EMAIL": "example@neo-assets.invalid",
    "GIT_COMMITTER_NAME": "neo-assets example",
    "GIT_COMMITTER_EMAIL": "example@neo-assets.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def ensure_sample_repo(home: Path) -> Path:
    target = home / "examples" / "sample-widgets"
    if (target / ".git").exists():
        return target
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(SAMPLE_SOURCE, target)
    private_tree(target)  # copytree keeps the checkout's modes
    env = {**os.environ, **_GIT_ENV}
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["commit", "-q", "-m", "Sample widgets for the acme example tenant"],
    ):
        subprocess.run(["git", "-C", str(target), *args], check=True, env=env)
    return target


def main() -> int:
    owner_only_umask()
    settings = load_settings()
    private_dir(settings.store.home_dir)
    path = ensure_sample_repo(settings.store.home_dir)
    print(f"sample repository ready: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
