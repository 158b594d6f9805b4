"""A real repository swept while its real server is SIGKILLed under a restarting supervisor.

    python -m bench.real_servers_killed [--repo PATH] [--kills 3] [--servers a,b]

Per server (``llama-server --parallel 2`` and ``llama_cpp.server``, the same settings as
``bench.real_servers_repo``, whose sweep this reuses), started under a supervisor that
starts it again 0.2 s after it dies:

1. ``unkilled``: a fresh sweep, nothing killed: the reference counts (``--reference-rows
   N`` skips it and takes the rows an earlier unkilled sweep stored);
2. ``killed``: a fresh sweep in a new ``NEO_HOME``; after each ``1/(kills+1)`` of the
   planned batches is written, the server is SIGKILLed (the lane's progress callback
   fires the kill, so it lands while the next batches are in flight); with
   ``--solo-kills M``, also 50 ms into each of the next M one-input dispatches after
   the last batch kill (an input alone at the provider: the case a strike is for);
3. ``after``: an incremental sweep in the killed sweep's home, nothing killed.

Every provider call of the killed sweep is logged (label, inputs, start, end, error).
Each strike in the ledger is matched to the one-input call that failed just before it
was recorded, and judged: ``alone`` (no other call overlapped it: the lane's slot/drain
rule held) and ``by_kill`` (a kill landed while it was in flight: the death is ours, the
input innocent). The claim, judged at the end (``held``): the killed sweep ends
``complete`` or ``deferred`` (never ``failed``), no input is fenced poison, every strike
is alone, and the sweep after it is ``complete`` with 0 poison and the unkilled rows.

Human lines go to stderr; the last stdout line is one JSON object.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: the repo root, not bench/, first on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.real_servers_repo import DEFAULT_REPO, LIMIT, sweep_in  # noqa: E402

POISON = "proven-content-poison"


class CallLog:
    """Every ``embed`` call of one provider: label, inputs, wall-clock start and end."""

    def __init__(self, on_start: Any = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.on_start = on_start

    def wrap(self, provider: Any) -> None:
        inner = provider.embed

        async def embed(texts: Any, cancel_scope: Any, operation_label: str) -> Any:
            call: dict[str, Any] = {"label": operation_label, "n": len(texts), "t0": time.time()}
            with self.lock:
                self.calls.append(call)
            if self.on_start is not None:
                self.on_start(call)
            try:
                out = await inner(texts, cancel_scope, operation_label)
            except BaseException as exc:
                call["error"] = type(exc).__name__
                raise
            finally:
                call["t1"] = time.time()
            return out

        provider.embed = embed

    def overlapped(self, call: dict[str, Any]) -> bool:
        return any(
            other is not call and other["t0"] < call["t1"] and other.get("t1", 1e18) > call["t0"]
            for other in self.calls
        )


class Killer:
    """SIGKILLs the server once the written batches pass each of ``kills`` points spread
    over the embedding stage (read from the lane's progress: done / planned batches)."""

    def __init__(self, server: Any, kills: int, solo_kills: int = 0) -> None:
        self.server = server
        self.points = [(i + 1) / (kills + 1) for i in range(kills)]
        self.at: list[float] = []
        self.batches_at: list[int] = []
        self.solo_left = solo_kills
        self.solo_at: list[float] = []

    def on_call(self, call: dict[str, Any]) -> None:
        """After the batch kills: SIGKILL the server 50 ms into a one-input dispatch still
        in flight then (an innocent input alone at the provider when it dies: the one
        death the lane may strike)."""
        if self.points or self.solo_left <= 0 or call["label"] != "embed-single":
            return
        self.solo_left -= 1

        def kill() -> None:
            if "t1" in call:  # answered within 50 ms: wait for the next one-input dispatch
                self.solo_left += 1
                return
            self.solo_at.append(time.time())
            self.at.append(self.solo_at[-1])
            self.server.kill()

        threading.Timer(0.05, kill).start()

    def progress(self, done: int, total: int, embedded: int) -> None:
        if not self.points or total <= 0 or done < self.points[0] * total:
            return
        self.points.pop(0)
        self.at.append(time.time())
        self.batches_at.append(done)
        self.server.kill()


def judge_strikes(strikes: list[dict[str, Any]], log: CallLog, kills: list[float]) -> list[dict]:
    """Each strike matched to the failed one-input call that ended last before it."""
    failed = [c for c in log.calls if c["n"] == 1 and "error" in c and "t1" in c]
    judged = []
    for strike in strikes:
        seen = float(strike.get("observedAt") or 0.0)
        before = [c for c in failed if c["t1"] <= seen + 0.001]
        call = max(before, key=lambda c: c["t1"]) if before else None
        judged.append(
            {
                "kind": strike["kind"],
                "count": strike["count"],
                "evidenceCode": strike.get("evidenceCode"),
                "operationLabel": strike.get("operationLabel"),
                "call": None if call is None else {k: call[k] for k in ("label", "error")},
                "alone": call is not None and not log.overlapped(call),
                "by_kill": call is not None and any(call["t0"] <= k <= call["t1"] for k in kills),
            }
        )
    return judged


def _brief(sweep: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in sweep.items() if k != "struck"}


def one_server(
    name: str,
    repo: Path,
    kills: int,
    logs: Path,
    reference_rows: int | None = None,
    solo_kills: int = 0,
    tokenizer: str = "estimate",
) -> dict[str, Any]:
    from neo_assets_tests.real_servers import (  # noqa: PLC0415
        LlamaCppPythonServer,
        LlamaServer,
        running,
    )

    server = (
        LlamaServer(logs, slots=2, ctx=2 * LIMIT)
        if name == "llama-server"
        else LlamaCppPythonServer(logs, n_ctx=LIMIT)
    )
    with running(server, supervise=True) as up:
        if reference_rows is None:
            fresh = Path(tempfile.mkdtemp(prefix="neo-bench-killed-ref-"))
            unkilled = sweep_in(fresh, repo, up.base_url, name, tokenizer=tokenizer)
        else:  # an unkilled sweep's rows measured before (bench.real_servers_repo)
            unkilled = {"rows": reference_rows, "poison": 0, "reference": "given"}
        print(f"{name} unkilled: {_brief(unkilled)}", file=sys.stderr, flush=True)
        restarts_before = up.restarts
        load_before = os.getloadavg()[0]
        home = Path(tempfile.mkdtemp(prefix="neo-bench-killed-"))
        killer = Killer(up, kills, solo_kills)
        log = CallLog(on_start=killer.on_call)
        killed = sweep_in(
            home,
            repo,
            up.base_url,
            name,
            progress=killer.progress,
            watch_provider=log.wrap,
            tokenizer=tokenizer,
        )
        restarts = up.restarts - restarts_before
        print(f"{name} killed: {_brief(killed)}", file=sys.stderr, flush=True)
        after = sweep_in(home, repo, up.base_url, name, tokenizer=tokenizer)
        print(f"{name} after: {_brief(after)}", file=sys.stderr, flush=True)
    strikes = judge_strikes(killed["struck"], log, killer.at)
    failed_calls = [c for c in log.calls if "error" in c]
    held = (
        killed["outcome"] in ("complete", "deferred")
        and killed["poison"] == 0
        and all(s["alone"] for s in strikes)
        and after["outcome"] == "complete"
        and after["poison"] == 0
        and after["rows"] == unkilled["rows"]
        and unkilled["poison"] == 0
    )
    return {
        "unkilled": _brief(unkilled),
        "killed": {
            **_brief(killed),
            "kills": len(killer.at),
            "solo_kills": len(killer.solo_at),
            "killed_after_batches": killer.batches_at,
            "restarts": restarts,
            "provider_calls": len(log.calls),
            "failed_calls": len(failed_calls),
            "failed_by_label": _tally(c["label"] for c in failed_calls),
            "failed_by_error": _tally(c["error"] for c in failed_calls),
            "calls_by_label": _tally(c["label"] for c in log.calls),
            "call_seconds_by_label": _seconds_by_label(log),
            "load_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "struck": strikes,
        },
        "after": _brief(after),
        "held": held,
    }


def _seconds_by_label(log: CallLog) -> dict[str, float]:
    """Wall seconds inside provider calls, per operation label (overlapping calls add)."""
    out: dict[str, float] = {}
    for call in log.calls:
        if "t1" in call:
            out[call["label"]] = out.get(call["label"], 0.0) + call["t1"] - call["t0"]
    return {k: round(v, 1) for k, v in sorted(out.items())}


def _tally(labels: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for label in labels:
        out[label] = out.get(label, 0) + 1
    return dict(sorted(out.items()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repo", type=Path, default=DEFAULT_REPO)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--servers", default="llama-server,llama_cpp.server")
    parser.add_argument(
        "--reference-rows",
        type=int,
        default=None,
        help="rows of an unkilled fresh sweep measured before: skip the unkilled sweep",
    )
    parser.add_argument(
        "--solo-kills",
        type=int,
        default=0,
        help="after the batch kills, also kill the server during this many one-input dispatches",
    )
    # How the split counts; the figures in docs/performance.md were measured with the
    # estimate (the token-dense inputs are fenced as geometry there, and counted as such).
    parser.add_argument("--tokenizer", choices=["server", "estimate"], default="estimate")
    args = parser.parse_args()
    repo = args.repo.resolve()
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    logs = Path(tempfile.mkdtemp(prefix="neo-bench-killed-logs-"))
    figures: dict[str, Any] = {
        "bench": "real_servers_killed",
        "repo": str(repo),
        "commit": commit,
        "kills": args.kills,
        "tokenizer": args.tokenizer,
    }
    for name in args.servers.split(","):
        figures[name] = one_server(
            name, repo, args.kills, logs, args.reference_rows, args.solo_kills, args.tokenizer
        )
        print(f"{name}: {json.dumps(figures[name])}", file=sys.stderr, flush=True)
    figures["held"] = all(figures[n]["held"] for n in args.servers.split(","))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
