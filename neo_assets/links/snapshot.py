"""A links run's snapshot: derived data the next links run of the repo starts from. One
CRC-checked file per repo under ``links-cache/``, written and renamed; any doubt reads as
no snapshot, and the run computes in full."""

import contextlib
import json
import math
import os
import re
import struct
import tempfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neo_assets.links.rules.lists import LinkLists
from neo_assets.links.rules.records import LINK_KINDS
from neo_assets.store.ledger import Ledger

LINKS_CACHE_DIR = "links-cache"  # under the data dir, beside the SQLite ledger
SNAPSHOT_FORMAT = 1


@dataclass(frozen=True)
class Snapshot:
    """What one links run saw: the rows (id, generation, vector; reused only while the collection
    still holds the row under that generation) and, when it stored its links, their kinds,
    times, lists and the link set's identity (valid only while the ledger's set is that one)."""

    ids: list[str]
    generations: list[str | None]
    vectors: np.ndarray  # (len(ids), d) float32
    link_set: dict[str, Any] | None = None
    kinds: list[str] | None = None
    times: np.ndarray | None = None  # float64, NaN for undated
    lists: dict[str, LinkLists] | None = None


def default_cache_dir(ledger: Ledger) -> Path | None:
    """``links-cache`` beside a SQLite ledger file (the data dir by default); None for a
    ledger elsewhere, whose runs then always compute in full."""
    url = ledger.engine.url
    database = url.database
    if url.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    return Path(database).expanduser().resolve().parent / LINKS_CACHE_DIR


_SAFE_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


def snapshot_path(cache_dir: Path, tenant_id: str, repo_slug: str) -> Path:
    def name(part: str) -> str:
        if _SAFE_NAME.fullmatch(part):
            return part
        return "x-" + part.encode().hex()[:120]

    return cache_dir / name(tenant_id) / f"{name(repo_slug)}.links"


_MAGIC = b"NEOLINKS"


def _write_container(path: Path, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    """``meta`` (JSON) and ``arrays`` in one file: magic, header length, header (the meta,
    and each array's dtype, shape and CRC-32), then the raw arrays. Written to a temporary
    file and renamed over ``path``, so a reader sees the old file or the new one."""
    parts = {name: np.ascontiguousarray(value) for name, value in arrays.items()}
    layout = {
        name: {
            "dtype": value.dtype.str,
            "shape": list(value.shape),
            "crc": zlib.crc32(_bytes_of(value)),
        }
        for name, value in parts.items()
    }
    header = json.dumps({"meta": meta, "arrays": layout}).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(_MAGIC + struct.pack("<Q", len(header)) + header)
            for value in parts.values():
                out.write(_bytes_of(value))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _bytes_of(value: np.ndarray) -> memoryview:
    """A C-contiguous array's bytes without a copy. Flattened first: a memoryview of an
    empty multi-dimensional array (no rows: shape (0, d)) refuses to be cast to bytes."""
    return memoryview(value.reshape(-1).view(np.uint8))


def _read_container(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """What ``_write_container`` wrote; ValueError when the file is torn or altered (a
    wrong length or checksum anywhere)."""
    data = path.read_bytes()
    if data[:8] != _MAGIC:
        raise ValueError("not a links snapshot")
    (size,) = struct.unpack("<Q", data[8:16])
    header = json.loads(data[16 : 16 + size])
    at = 16 + size
    view = memoryview(data)
    arrays: dict[str, np.ndarray] = {}
    for name, spec in header["arrays"].items():
        dtype = np.dtype(spec["dtype"])
        shape = tuple(int(x) for x in spec["shape"])
        nbytes = dtype.itemsize * math.prod(shape)
        chunk = view[at : at + nbytes]
        if len(chunk) != nbytes or zlib.crc32(chunk) != spec["crc"]:
            raise ValueError(f"torn array {name}")
        arrays[name] = np.frombuffer(chunk, dtype=dtype).reshape(shape)
        at += nbytes
    if at != len(data):
        raise ValueError("trailing bytes")
    return header["meta"], arrays


def load_snapshot(path: Path, tenant_id: str, repo_slug: str) -> Snapshot | None:
    """The snapshot at ``path``, or None when it is missing, torn, unreadable or not this
    repo's: a snapshot is only a cache, so any doubt reads as none. Lists that do not fit
    its rows (or no stored links) leave the rows' vectors usable without lists."""
    try:
        meta, data = _read_container(path)
        if (
            meta.get("format") != SNAPSHOT_FORMAT
            or meta.get("tenant") != tenant_id
            or meta.get("repo") != repo_slug
        ):
            return None
        ids, generations, vectors = list(meta["ids"]), list(meta["generations"]), data["vectors"]
        n = len(ids)
        if (
            vectors.dtype != np.float32
            or vectors.ndim != 2
            or vectors.shape[0] != n
            or len(generations) != n
            or len(set(ids)) != n
            or not all(isinstance(i, str) for i in ids)
            or not all(g is None or isinstance(g, str) for g in generations)
        ):
            return None
        plain = Snapshot(ids, generations, vectors)
        stored = meta.get("linkSet")
        if not isinstance(stored, dict):
            return plain
        kinds, times = list(meta["kinds"]), data["times"]
        lists = {
            kind: LinkLists(
                data[f"{kind}_offsets"].astype(np.int64),
                data[f"{kind}_neighbours"].astype(np.int64),
                data[f"{kind}_weights"].astype(np.float64),
            )
            for kind in LINK_KINDS
        }
        if (
            len(kinds) != n
            or not all(isinstance(k, str) for k in kinds)
            or times.dtype != np.float64
            or times.shape != (n,)
            or not all(lst.is_well_formed(n) for lst in lists.values())
        ):
            return plain
        return Snapshot(ids, generations, vectors, stored, kinds, times, lists)
    except Exception:  # noqa: BLE001 - a cache never fails the run: any doubt reads as none
        return None


def save_snapshot(path: Path, tenant_id: str, repo_slug: str, snapshot: Snapshot) -> bool:
    """Write ``snapshot`` atomically; False when it could not be written (the next run then
    computes in full). Each array carries a CRC-32, so a torn or altered file fails to load
    rather than loading wrong."""
    meta: dict[str, Any] = {
        "format": SNAPSHOT_FORMAT,
        "tenant": tenant_id,
        "repo": repo_slug,
        "ids": snapshot.ids,
        "generations": snapshot.generations,
        "linkSet": None,
    }
    arrays: dict[str, np.ndarray] = {"vectors": np.asarray(snapshot.vectors, dtype=np.float32)}
    if snapshot.link_set is not None and snapshot.lists is not None:
        meta["linkSet"] = snapshot.link_set
        meta["kinds"] = snapshot.kinds
        arrays["times"] = np.asarray(snapshot.times, dtype=np.float64)
        for kind in LINK_KINDS:
            lists = snapshot.lists[kind]
            arrays[f"{kind}_offsets"] = lists.offsets.astype(np.int64)
            arrays[f"{kind}_neighbours"] = lists.neighbours.astype(np.int32)
            arrays[f"{kind}_weights"] = lists.weights.astype(np.float64)
    try:
        _write_container(path, meta, arrays)
        return True
    except OSError:
        return False
