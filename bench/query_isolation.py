"""Benchmark: a tenant's vector search does not depend on other tenants' rows.

Run from the repo root: ``python -m bench.query_isolation`` (``--rows N`` of tenant A,
``--others N`` rows of ten other tenants, ``--tries N`` timed queries per case, ``--dims``;
defaults: 30,000 / 300,000 / 100 / 128). It never downloads.

Real Chroma (the project's ``ChromaStore``, persistent, in a temporary directory) and the
project's ``QueryService``: A's rows are written and recorded in the ledger as its
complete declared generation (``bench.query.seed``), as a sweep leaves them; the other
tenants' rows carry the same stamps (same embedding generation) and random unit vectors.
The query's vector is given (``QueryService._search_sync``, after the provider would have
embedded the text: its cost does not depend on the rows), vector ranking only, k=10.

1. **Latency**: p50 / p95 of A's queries (random unit probes) with A alone (``alone``)
   and with the others beside it (``shared``); the target is ``shared`` within 20 % of
   ``alone``.
   ``where_always`` (the filter as a Chroma ``where``) is timed beside it for its cost.
2. **Timing side channel**: two probes, one close to 1,000 of tenant B's rows, one close to
   50 of A's own rows, each asked ``--tries`` times, interleaved; median of each and their
   difference, with the path before issue 33 (the whole collection asked first without a
   filter, the tenant's rows kept in Python, asked again with the filter when too few:
   re-created here as ``UnfilteredFirst``) and with today's (the filter in the store's
   query). The old path's difference tells A that another tenant holds content close to
   a text A chose; today's must not.

The last stdout line is one JSON object with every figure.
"""

import argparse
import contextlib
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: the repo root, not bench/, on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.query import seed, synthetic_chunks, unit_vectors, write_tenants  # noqa: E402

K = 10
OTHER_TENANTS = 10
CLOSE_FOREIGN = 1000  # B's rows near the foreign probe (more than the old path's 640)
CLOSE_OWN = 50  # A's rows near the own probe
NOISE = 0.05
LATENCY_PROBES = 200
# The pre-issue-33 path's bounds (query/search.py before it).
OLD_OVERFETCH, OLD_MIN_FETCH, OLD_MAX_UNFILTERED, OLD_MAX_FETCH = 4, 40, 640, 4000


def service_classes() -> tuple[Any, Any]:
    """The query service as it was (the whole collection asked first, kept in Python),
    and with a ``where`` on every query."""
    import numpy as np

    from neo_assets.query.search import QueryService

    class UnfilteredFirst(QueryService):
        def _where(
            self, tenant_id: str, generation: str, repos: Any, request: Any
        ) -> dict[str, Any]:
            clauses: list[dict[str, Any]] = [
                {"tenantId": {"$eq": tenant_id}},
                {"embeddingGeneration": {"$eq": generation}},
                {"repoSlug": {"$eq": repos[0]}}
                if len(repos) == 1
                else {"repoSlug": {"$in": list(repos)}},
            ]
            for name in ("language", "kind"):  # the pre-33 path's equality filters
                if (wanted := request.wants(name)) is not None:
                    clauses.append({name: {"$eq": wanted}})
            return {"$and": clauses}

        def _vector_candidates(  # type: ignore[override]
            self,
            target: Any,
            tenant_id: str,
            request: Any,
            repos: list[str],
            vector: Any,
            keep: Any,
            served: list[str],
        ) -> dict[str, float]:
            del served
            collection = target.store.collection
            query = np.asarray([vector], dtype=np.float32)
            fetch = min(max(request.k * OLD_OVERFETCH, OLD_MIN_FETCH), OLD_MAX_UNFILTERED)
            while True:
                got = collection.query(
                    query_embeddings=query, n_results=fetch, include=["distances"]
                )
                pairs = list(zip(got["ids"][0], got["distances"][0], strict=True))
                kept = {rid: 1.0 - float(d) for rid, d in pairs if keep(rid)}
                if len(kept) >= request.k or len(pairs) < fetch:
                    return kept
                if fetch >= OLD_MAX_UNFILTERED:
                    break
                fetch = min(fetch * 8, OLD_MAX_UNFILTERED)
            where = self._where(tenant_id, target.embedding_generation, repos, request)
            fetch = min(max(request.k * OLD_OVERFETCH, OLD_MIN_FETCH), OLD_MAX_FETCH)
            while True:
                got = collection.query(
                    query_embeddings=query, n_results=fetch, where=where, include=["distances"]
                )
                pairs = list(zip(got["ids"][0], got["distances"][0], strict=True))
                kept = {rid: 1.0 - float(d) for rid, d in pairs if keep(rid)}
                if len(kept) >= request.k or len(pairs) < fetch or fetch >= OLD_MAX_FETCH:
                    return kept
                fetch = min(fetch * 8, OLD_MAX_FETCH)

    class WhereAlways(UnfilteredFirst):
        """The tenant's filter as a Chroma ``where`` on every query (no unfiltered first
        query): what the id list replaced, for its cost."""

        def _vector_candidates(  # type: ignore[override]
            self,
            target: Any,
            tenant_id: str,
            request: Any,
            repos: list[str],
            vector: Any,
            keep: Any,
            served: list[str],
        ) -> dict[str, float]:
            del served
            where = self._where(tenant_id, target.embedding_generation, repos, request)
            got = target.store.collection.query(
                query_embeddings=np.asarray([vector], dtype=np.float32),
                n_results=max(request.k * OLD_OVERFETCH, OLD_MIN_FETCH),
                where=where,
                include=["distances"],
            )
            pairs = zip(got["ids"][0], got["distances"][0], strict=True)
            return {rid: 1.0 - float(d) for rid, d in pairs if keep(rid)}

    return UnfilteredFirst, WhereAlways


def near(center: Any, n: int, rng: Any) -> Any:
    import numpy as np

    v = center[None, :] + NOISE * rng.standard_normal((n, center.shape[0])).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def add_others(store: Any, generation: str, others: int, dims: int, foreign_probe: Any) -> float:
    """``others`` rows of ten other tenants (the first ``CLOSE_FOREIGN`` of tenant t0 near
    ``foreign_probe``), written in store batches; returns the seconds taken."""
    import numpy as np

    from neo_assets.core.ids.stamps import row_stamps

    rng = np.random.default_rng(7)
    started = time.perf_counter()
    per_tenant = others // OTHER_TENANTS
    step = 5000
    now = time.time()
    for t in range(OTHER_TENANTS):
        tenant = f"t{t}"
        for start in range(0, per_tenant, step):
            n = min(step, per_tenant - start)
            vectors = rng.standard_normal((n, dims)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            if t == 0 and start == 0:
                vectors[:CLOSE_FOREIGN] = near(foreign_probe, CLOSE_FOREIGN, rng)
            ids = [hashlib.sha256(f"{tenant}/{start + i}".encode()).hexdigest() for i in range(n)]
            metas = [
                row_stamps(
                    tenant_id=tenant,
                    repo_slug="theirs",
                    source_path=f"pkg{(start + i) // 1000}/mod{(start + i) // 10}.py",
                    kind="function",
                    name=f"fn_{start + i}",
                    parser_id="neo-code",
                    parser_version="2.0.0",
                    tenant_config_version=1,
                    ingested_at=now,
                    revision="bench-theirs",
                    embedding_generation=generation,
                )
                | {"language": "python"}
                for i in range(n)
            ]
            store.add(ids, vectors, [f"def fn_{start + i}(): pass" for i in range(n)], metas)
        print(f"  others: tenant {tenant} written", file=sys.stderr)
    return time.perf_counter() - started


def percentiles(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {
        "p50_ms": round(statistics.median(ms), 2),
        "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 2),
    }


@contextlib.contextmanager
def world(
    root: Path, rows: int, others: int, dims: int, probes: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    """One knowledge base under ``root``: A's rows (+ ``others``), its stores kept open
    while the caller times queries; yields the figures so far, the services and ``ask``."""
    import numpy as np

    from neo_assets.config.settings import load_settings
    from neo_assets.generations.serving import configured_generation
    from neo_assets.query.rules.request import SearchRequest
    from neo_assets.query.search import QueryService
    from neo_assets.query.serving import Resident, serving_targets
    from neo_assets.query.vector_cache import VectorCache
    from neo_assets.services.handles import open_ledger, open_store

    tenants_path = write_tenants(root, {"a": ["big"]})
    env = {
        "NEO_HOME": str(root / "home"),
        "NEO_TENANTS_FILE": str(tenants_path),
        "NEO_EMBEDDING_PROVIDER": "hashing",
        "NEO_EMBEDDING_DIMENSIONS": str(dims),
        "NEO_SERVE_TRUTH_RECHECK_S": "3600",
    }
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        settings = load_settings()
        generation = configured_generation(settings)
        out: dict[str, Any] = {"tenant_rows": rows, "other_rows": others}
        with open_ledger(settings) as ledger, open_store(settings) as store:
            started = time.perf_counter()
            chunks = synthetic_chunks("a", "big", rows, random.Random(25))
            vectors = unit_vectors(rows, dims, random.Random(26))
            vectors[:CLOSE_OWN] = near(probes["own"], CLOSE_OWN, np.random.default_rng(8))
            seed(settings, store, ledger, "a", "big", chunks, vectors)
            out["seed_tenant_s"] = round(time.perf_counter() - started, 1)
            if others:
                out["seed_others_s"] = round(
                    add_others(store, generation, others, dims, probes["foreign"]), 1
                )
            out["collection_rows"] = store.count()
            resident = Resident(settings, store, ledger)
            services = {"filtered": QueryService(resident), "store_ids": QueryService(resident)}
            services["store_ids"].vectors = VectorCache(0)  # the id list in the store's query
            if others:
                unfiltered_first, where_always = service_classes()
                services["unfiltered_first"] = unfiltered_first(resident)
                services["where_always"] = where_always(resident)
            target = serving_targets(resident, "a").first
            request = SearchRequest(query="probe", k=K)

            def ask(svc: Any, vector: Any) -> tuple[float, list[dict[str, Any]]]:
                t0 = time.perf_counter()
                got = svc._search_sync(target, "a", request, ["big"], vector, False)  # noqa: SLF001
                return (time.perf_counter() - t0) * 1000, got

            for name, svc in services.items():  # the truth view and the caches, untimed
                took, _ = ask(svc, probes["latency"][0])
                out[f"first_query_ms_{name}"] = round(took, 1)  # the cache reads A's vectors
                for v in probes["latency"][:20]:
                    ask(svc, v)
            yield {"figures": out, "services": services, "ask": ask}
    finally:
        os.environ.clear()
        os.environ.update(saved)


def latency_interleaved(
    alone: dict[str, Any], shared: dict[str, Any], probes: dict[str, Any]
) -> None:
    """p50 / p95 of A's queries in both worlds, each probe asked of both in turn (the
    order alternating), so the machine's load weighs on both alike."""
    for name in ("filtered", "store_ids"):
        ms: dict[str, list[float]] = {"alone": [], "shared": []}
        foreign = {"alone": 0, "shared": 0}
        for i, v in enumerate(probes["latency"]):
            pair = [("alone", alone), ("shared", shared)]
            for label, w in pair if i % 2 == 0 else pair[::-1]:
                took, got = w["ask"](w["services"][name], v)
                assert len(got) == K, len(got)
                ms[label].append(took)
                foreign[label] += sum(h["metadata"]["tenantId"] != "a" for h in got)
        key = "latency" if name == "filtered" else f"latency_{name}"
        for label, w in (("alone", alone), ("shared", shared)):
            w["figures"][key] = percentiles(ms[label]) | {
                "queries": len(ms[label]),
                "foreign_rows": foreign[label],
            }


def side_channel(shared: dict[str, Any], probes: dict[str, Any]) -> None:
    out, ask = shared["figures"], shared["ask"]
    for name, svc in shared["services"].items():
        times: dict[str, list[float]] = {"near_foreign": [], "near_own": []}
        for _ in range(probes["tries"]):
            for label, key in (("near_foreign", "foreign"), ("near_own", "own")):
                took, got = ask(svc, probes[key])
                assert len(got) == K and all(h["metadata"]["tenantId"] == "a" for h in got)
                times[label].append(took)
        med = {label: statistics.median(t) for label, t in times.items()}
        out[f"side_channel_{name}"] = {
            "near_foreign_median_ms": round(med["near_foreign"], 2),
            "near_own_median_ms": round(med["near_own"], 2),
            "difference_ms": round(med["near_foreign"] - med["near_own"], 2),
            "ratio": round(med["near_foreign"] / med["near_own"], 3),
        }
        print(f"  {name}: {out[f'side_channel_{name}']}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--others", type=int, default=300_000)
    parser.add_argument("--tries", type=int, default=100)
    parser.add_argument("--dims", type=int, default=128)
    args = parser.parse_args(argv)
    import numpy as np

    rng = np.random.default_rng(3)

    def unit(n: int) -> Any:
        v = rng.standard_normal((n, args.dims)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    probes = {
        "latency": list(unit(LATENCY_PROBES)),
        "foreign": unit(1)[0],
        "own": unit(1)[0],
        "tries": args.tries,
    }
    summary: dict[str, Any] = {"bench": "query_isolation", "k": K, "dims": args.dims}
    summary["load_average_at_start"] = os.getloadavg()[0]
    with (
        tempfile.TemporaryDirectory(prefix="bench-isolation-") as tmp,
        world(Path(tmp) / "alone", args.rows, 0, args.dims, probes) as alone,
        world(Path(tmp) / "shared", args.rows, args.others, args.dims, probes) as shared,
    ):
        latency_interleaved(alone, shared, probes)
        side_channel(shared, probes)
        summary["alone"], summary["shared"] = alone["figures"], shared["figures"]
        print(f"  {summary}", file=sys.stderr)
    alone, shared = summary["alone"]["latency"], summary["shared"]["latency"]
    summary["shared_over_alone_p50"] = round(shared["p50_ms"] / alone["p50_ms"], 3)
    summary["shared_over_alone_p95"] = round(shared["p95_ms"] / alone["p95_ms"], 3)
    store_alone, store_shared = (
        summary["alone"]["latency_store_ids"],
        summary["shared"]["latency_store_ids"],
    )
    summary["store_ids_shared_over_alone_p50"] = round(
        store_shared["p50_ms"] / store_alone["p50_ms"], 3
    )
    summary["store_ids_shared_over_alone_p95"] = round(
        store_shared["p95_ms"] / store_alone["p95_ms"], 3
    )
    summary["within_20_percent"] = (
        summary["shared_over_alone_p50"] <= 1.2 and summary["shared_over_alone_p95"] <= 1.2
    )
    summary["load_average_at_end"] = os.getloadavg()[0]
    print(json.dumps(summary, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
