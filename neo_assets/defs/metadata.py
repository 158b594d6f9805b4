"""Small builders for metadata the Dagster UI renders (tables) and plots (numbers)."""

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import dagster as dg
import pandas as pd

from neo_assets.sweep.rules import summary as keys

_PREVIEW_ROWS = 10


def preview_table(frame: pd.DataFrame, columns: Sequence[str], rows: int = _PREVIEW_ROWS) -> Any:
    """A table preview of the first ``rows`` rows of ``columns`` (strings, bounded)."""
    cols = [c for c in columns if c in frame.columns]
    return preview_records(frame[cols].head(rows).to_dict("records"), cols, rows)


def preview_records(
    records: Iterable[Mapping[str, Any]], columns: Sequence[str], rows: int = _PREVIEW_ROWS
) -> Any:
    """``preview_table`` of plain records (the first ``rows``; every record has ``columns``)."""
    table = [
        dg.TableRecord({c: _cell(r[c]) for c in columns}) for r in itertools.islice(records, rows)
    ]
    schema = dg.TableSchema(columns=[dg.TableColumn(c, "string") for c in columns])
    return dg.MetadataValue.table(records=table, schema=schema)


def _cell(value: Any) -> str:
    text = "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)
    return text if len(text) <= 120 else text[:117] + "..."


def counts_metadata(counts: Mapping[str, Any]) -> dict[str, Any]:
    """Every numeric count as its own metadata entry, so the UI plots it over time. Named
    by the count's spelling before camelCase (``count_fenced_poison``): a plot's history
    is its name's, and these names are the UI's, not a JSON document's."""
    return {
        f"count_{keys.metric_name(k)}": int(v)
        for k, v in sorted(counts.items())
        if isinstance(v, int | float) and not isinstance(v, bool)
    }


# ---------------------------------------------------------------------------- summaries
# Names of the numbers every sweep records, so the UI plots each one over time (Dagster
# plots numeric metadata of an asset's materializations; text and JSON it only shows).
SWEEP_METRICS = (
    "rows",
    "new",
    "skipped",
    "fenced_poison",
    "fenced_undeliverable",
    "strikes",
    "deferred",
    "sweep_seconds",
    "chunks_per_second",
)


def _md_cell(value: Any) -> str:
    text = _cell(value).replace("|", "\\|").replace("\n", " ")
    return text or " "


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """A GitHub-flavoured markdown table (cells escaped and bounded)."""
    head = "| " + " | ".join(columns) + " |\n| " + " | ".join("---" for _ in columns) + " |"
    body = ["| " + " | ".join(_md_cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join([head, *body])


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def envelope_summary(
    key: str, revision: str, kind: str, paths: int, yielded: int, skip_reasons: Mapping[str, int]
) -> Any:
    reasons = [{"reason": r, "paths": n} for r, n in sorted(skip_reasons.items())]
    text = (
        f"**{key}** at `{revision[:12]}` ({kind}): **{paths}** paths, **{yielded}** yielded "
        f"to the parser, **{paths - yielded}** skipped."
    )
    if reasons:
        text += "\n\n" + markdown_table(reasons, ["reason", "paths"])
    return dg.MetadataValue.md(text)


def chunks_summary(
    key: str, parser: str, chunks: int, paths: int, kinds: Mapping[str, int], windowed: str = ""
) -> Any:
    rows = [{"kind": k, "chunks": n} for k, n in sorted(kinds.items())]
    text = f"**{key}** parsed by `{parser}`: **{chunks}** chunks from **{paths}** paths."
    if windowed:
        text += f" {windowed} (of the files parsed this sweep)."
    if rows:
        text += "\n\n" + markdown_table(rows, ["kind", "chunks"])
    return dg.MetadataValue.md(text)


def sweep_numbers(counts: Mapping[str, Any], strikes: int, seconds: float) -> dict[str, Any]:
    """The embedding step's counts under the names the UI plots (``SWEEP_METRICS``): ``rows``
    present after the sweep, ``skipped`` already present or fenced."""
    new = _int(counts.get(keys.EMBEDDED))
    present = _int(counts.get(keys.ALREADY_PRESENT))
    return {
        "rows": present + new,
        "new": new,
        "skipped": present + _int(counts.get(keys.ALREADY_FENCED)),
        "fenced_poison": _int(counts.get(keys.FENCED_POISON)),
        "fenced_undeliverable": _int(counts.get(keys.FENCED_UNDELIVERABLE)),
        "strikes": int(strikes),
        "deferred": _int(counts.get(keys.DEFERRED)),
        "chunks_per_second": float(new) / seconds if seconds > 0 else 0.0,
    }


def embeddings_summary(
    key: str, numbers: Mapping[str, Any], strikes: Sequence[Any], notices: Sequence[str] = ()
) -> Any:
    text = (
        f"**{key}**: **{numbers['new']}** new rows, {numbers['skipped']} skipped (present or "
        f"fenced), {numbers['deferred']} deferred, {numbers['fenced_poison']} fenced as "
        f"content poison, {numbers['fenced_undeliverable']} undeliverable at this geometry; "
        f"{numbers['rows']} rows of the declared generation in the collection; "
        f"{numbers['chunks_per_second']:.1f} chunks/s."
    )
    rows = [s for s in strikes if isinstance(s, Mapping)][:_PREVIEW_ROWS]
    if rows:
        text += "\n\nStruck chunks (deferred, not fenced yet):\n\n" + markdown_table(
            rows, ["chunkId", "kind", "strikes", "threshold"]
        )
    for notice in notices:
        text += f"\n\nNote: {notice}."
    return dg.MetadataValue.md(text)


def strikes_table(strikes: Sequence[Any]) -> Any:
    return preview_table(
        pd.DataFrame([s for s in strikes if isinstance(s, Mapping)]),
        ["chunkId", "kind", "strikes", "threshold"],
    )


def census_summary(key: str, result: Mapping[str, Any], numbers: Mapping[str, Any]) -> Any:
    cause = result.get("deferredCauseCode")
    verdict = f"**{result.get('outcome')}**" + (f" (cause `{cause}`)" if cause else "")
    rows = [
        {"metric": name, "value": round(v, 2) if isinstance(v, float) else v}
        for name, v in numbers.items()
    ]
    families = []
    for family in ("contentPoisonChunks", "undeliverableChunks", "secretChunks"):
        census = result.get(family) or {}
        ids = list(census.get("ids") or [])
        families.append(
            {"census": family, "count": census.get("count"), "first ids": ", ".join(ids[:3])}
        )
    text = (
        f"{key} at `{str(result.get('revision') or '')[:12]}`: {verdict}, "
        f"consecutive failures {result.get('consecutiveFailures')}.\n\n"
        + markdown_table(rows, ["metric", "value"])
        + "\n\n"
        + markdown_table(families, ["census", "count", "first ids"])
    )
    return dg.MetadataValue.md(text)


def status_summary(frame: pd.DataFrame) -> Any:
    """Per repo what an operator acts on (``status.rules.repo_state_line``): complete,
    deferred (cause, next try), failed (the error's first line and its fix), retired."""
    if not len(frame) or "outcome" not in frame.columns:
        return dg.MetadataValue.md("No repo is declared.")
    column = "state" if "state" in frame.columns else "outcome"
    counts = frame[column].fillna("never swept").value_counts().to_dict()
    line = ", ".join(f"**{n}** {state}" for state, n in sorted(counts.items()))
    cols = [c for c in ("tenantId", "repoSlug", column, "rows") if c in frame.columns]
    records = frame.head(50).to_dict("records")
    table = markdown_table(records, cols)
    # The details in full (a table cell is bounded): what to do about each repo not complete.
    details = [
        f"- `{r['tenantId']}/{r['repoSlug']}` **{r[column]}**: {r['stateDetail']}"
        for r in records
        if r.get("stateDetail") and r.get(column) not in ("complete",)
    ]
    tail = ("\n\n" + "\n".join(details)) if details else ""
    return dg.MetadataValue.md(f"{len(frame)} repos: {line}.\n\n{table}{tail}")


def run_seconds(instance: dg.DagsterInstance, run_id: str, now: float) -> float | None:
    """Seconds since the run started (the whole sweep, when asked by its last step)."""
    record = instance.get_run_record_by_id(run_id)
    start = record.start_time if record else None
    return max(now - start, 0.0) if start else None
