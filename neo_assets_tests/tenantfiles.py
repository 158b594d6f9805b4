"""Write tenants.yaml files for tests (real files, validated by the real loader)."""

from pathlib import Path
from typing import Any

import yaml


def repo_entry(
    slug: str,
    path: Path | str,
    *,
    version: str = "1.0.0",
    exclude: list[str] | None = None,
    ref: str | None = None,
    parser_id: str = "neo-code",
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "slug": slug,
        "path": str(path),
        "parser": {"id": parser_id, "version": version, "exclude": list(exclude or [])},
    }
    if ref is not None:
        entry["ref"] = ref
    return entry


def write_tenants(path: Path, tenants: dict[str, list[dict[str, Any]]]) -> Path:
    doc = {"tenants": [{"id": tid, "repos": repos} for tid, repos in tenants.items()]}
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path
