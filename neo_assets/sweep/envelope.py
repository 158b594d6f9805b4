"""Stage 1 of a sweep: the envelope (revision and file list), reused when nothing changed."""

from dataclasses import dataclass

from neo_assets.config.settings import Settings
from neo_assets.core.ids.config_digest import declaration_digest, repo_declaration_digest
from neo_assets.sources.envelope import build_envelope
from neo_assets.sources.model import Envelope, FileEntry
from neo_assets.sources.rules.envelope_reuse import envelope_delta
from neo_assets.store.ledger import Ledger
from neo_assets.sweep.context import RepoContext


@dataclass
class EnvelopeResult:
    revision: str
    kind: str
    config_version: int
    declaration_digest: str
    repo_declaration_digest: str
    listing: Envelope  # its entries (sorted by path), for the metadata and the chunk stage


def previous_envelope(ledger: Ledger, ctx: RepoContext) -> Envelope | None:
    """The repo's last recorded envelope, rebuilt from the ledger (None when never seen)."""
    record = ledger.envelope_rows(ctx.tenant_id, ctx.repo_slug)
    if record is None:
        return None
    head, rows = record
    entries = tuple(
        sorted(
            FileEntry(path, int(size or 0), blob or "", bool(yielded), reason, changed_at)
            for path, size, blob, yielded, reason, changed_at in rows
        )
    )
    return Envelope(
        kind=head["kind"],
        root=str(ctx.repo.path),
        revision=head["revision"],
        entries=entries,
        rules=head.get("rules") or "",
    )


def _entry_key(e: FileEntry) -> tuple[object, ...]:
    return (e.path, e.size, e.blob, e.yielded, e.skip_reason, e.changed_at)


def envelope_step(
    ctx: RepoContext,
    settings: Settings,
    ledger: Ledger,
    now: float,
) -> EnvelopeResult:
    """List the repo at its revision, record the envelope and the tenant's configVersion.

    The previous envelope lets git skip re-reading blobs it has already classified, so
    the cost follows what changed, not the repo's size."""
    previous = previous_envelope(ledger, ctx)
    env = build_envelope(
        ctx.repo.path,
        ref=ctx.repo.ref,
        exclude=ctx.repo.parser.effective_exclude,
        max_file_bytes=settings.sweep.max_file_bytes,
        previous=previous,
    )
    tenant_digest = declaration_digest(ctx.tenant.to_plain())
    version = ledger.config_version(ctx.tenant_id, tenant_digest, now)
    # What differs from the recorded envelope, path by path (None: none recorded, or most
    # of it differs). Nothing differs for the recorded envelope itself (same commit, same
    # rules: build_envelope reused it) or one listed afresh with the same entries.
    reused = previous is not None and env.entries is previous.entries
    delta = (
        None
        if previous is None or reused
        else envelope_delta(previous.entries, env.entries, _entry_key)
    )
    unchanged = reused or (
        previous is not None
        and previous.revision == env.revision
        and previous.kind == env.kind
        and delta == ([], [])
    )
    if unchanged:
        ledger.touch_envelope(ctx.tenant_id, ctx.repo_slug, now=now, rules=env.rules)
    else:
        changed, replacing = delta if delta is not None else (env.entries, None)
        ledger.record_envelope(
            ctx.tenant_id,
            ctx.repo_slug,
            revision=env.revision,
            kind=env.kind,
            # The entries themselves: the frame's to_dict boxed every cell.
            entries=(e._asdict() for e in changed),
            now=now,
            rules=env.rules,
            replacing=replacing,
        )
    return EnvelopeResult(
        revision=env.revision,
        kind=env.kind,
        config_version=version,
        declaration_digest=tenant_digest,
        repo_declaration_digest=repo_declaration_digest(ctx.repo.to_plain()),
        listing=env,
    )
