"""What the project keeps under NEO_HOME (the ledger with its token hashes, the chunks'
text in Chroma, Dagster's run logs) is readable by its owner only: NEO_HOME is made 0700
when a process opens it, the SQLite ledger 0600, and the project's processes create files
with the umask 077 (so Chroma's and Dagster's own files are 0600 and their folders 0700)."""

import contextlib
import os
from pathlib import Path

OWNER_ONLY_UMASK = 0o077
DIR_MODE = 0o700
FILE_MODE = 0o600


def owner_only_umask() -> None:
    """Files this process creates from now on are its owner's only (what the CLI, the
    service and the Dagster definitions set first thing)."""
    os.umask(OWNER_ONLY_UMASK)


def private_dir(path: Path) -> Path:
    """``path`` made (parents too) and, when this user owns it, set to 0700."""
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    _tighten(path, DIR_MODE)
    return path


def private_file(path: Path) -> None:
    """``path`` set to 0600 when it exists and this user owns it."""
    _tighten(path, FILE_MODE)


def private_tree(root: Path) -> None:
    """Every folder under ``root`` 0700 and every file 0600 (a copied tree keeps its
    source's modes whatever the umask)."""
    private_dir(root)
    for path in root.rglob("*"):
        if not path.is_symlink():
            _tighten(path, DIR_MODE if path.is_dir() else FILE_MODE)


def _tighten(path: Path, mode: int) -> None:
    with contextlib.suppress(FileNotFoundError, PermissionError):
        st = path.stat()
        if st.st_uid == os.getuid() and (st.st_mode & 0o777) != mode:
            path.chmod(mode)
