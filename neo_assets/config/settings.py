"""Every tunable of the project, one section per capability, one typed leaf each with its
default and NEO_* name. Read from the environment when used, so an operator who changes a
leaf between two runs is heard on the second."""

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from neo_assets.core.store_urls import chroma_address
from neo_assets.embedding.rules.provider_kinds import PROVIDER_KINDS, provider_problem

PACKAGE_DIR = Path(__file__).resolve().parents[1]
# The example shipped with the checkout (one tenant is the checkout itself).
BUNDLED_TENANTS_FILE = PACKAGE_DIR.parent / "examples" / "tenants.yaml"

ProviderKind = Literal[PROVIDER_KINDS]  # type: ignore[valid-type]


class SettingsError(ValueError):
    """A NEO_* variable holds a value the project cannot use; the message names it."""


class _Section(BaseSettings):
    """One capability's settings: each leaf read from NEO_<prefix><leaf>."""

    model_config = SettingsConfigDict(env_prefix="NEO_", extra="ignore", frozen=True)


def _blank_is_unset(value: object) -> object:
    return None if isinstance(value, str) and not value.strip() else value


class StoreSettings(_Section):
    """Where things live: the data root, the tenants file, Chroma and the ledger."""

    home: Path = Field(Path(".neo"), description="data root (chroma, ledger, dagster)")
    tenants_file: Path | None = Field(None, description="tenants.yaml; default ./tenants.yaml")
    # Repo paths must resolve under one of these (JSON, '["/srv/repos"]'); unset = anywhere.
    allowed_roots: list[Path] | None = Field(None, description="allowed repo roots")
    chroma_url: str | None = Field(None, description="http://host:port of a Chroma server")
    ledger_url: str | None = Field(None, description="SQLAlchemy URL of the ledger")
    collection_name: str = "neo-knowledge-base"
    # With NEO_CHROMA_URL unset, how the directory under NEO_HOME is opened: ``server``, one
    # local Chroma server for every process (started on first use, store/local_server.py),
    # or ``embedded``, in this process only (one process at a time: a single-process tool).
    chroma_local: Literal["server", "embedded"] = "server"
    # The local server stops once no process that opened the store has lived this long.
    chroma_server_idle_s: float = Field(60.0, gt=0)

    _blank = field_validator("chroma_url", "ledger_url", "tenants_file", mode="before")(
        _blank_is_unset
    )

    @field_validator("chroma_url")
    @classmethod
    def _chroma_url_is_an_address(cls, url: str | None) -> str | None:
        if url is not None:
            chroma_address(url)  # ValueError naming the shape it needs
        return url

    @field_validator("ledger_url")
    @classmethod
    def _ledger_url_is_a_database_url(cls, url: str | None) -> str | None:
        if url is not None:
            try:
                make_url(url)
            except sa_exc.ArgumentError:
                raise ValueError(
                    "not a SQLAlchemy database URL (e.g. postgresql+psycopg://user@host/db, "
                    "or unset for the SQLite ledger under NEO_HOME)"
                ) from None
        return url

    @property
    def home_dir(self) -> Path:
        return self.home.expanduser().resolve()

    @property
    def chroma_dir(self) -> Path:
        return self.home_dir / "chroma"

    @property
    def dagster_home(self) -> Path:
        return self.home_dir / "dagster"

    @property
    def resolved_ledger_url(self) -> str:
        return self.ledger_url or f"sqlite:///{self.home_dir / 'ledger.sqlite'}"

    @property
    def resolved_tenants_file(self) -> Path:
        if self.tenants_file is not None:
            return self.tenants_file.expanduser().resolve()
        local = Path("tenants.yaml")
        return local.resolve() if local.exists() else BUNDLED_TENANTS_FILE


CALIBRATED_CHARS_PER_TOKEN = 2.3


class EmbeddingSettings(_Section, env_prefix="NEO_EMBEDDING_"):
    """The embedding provider and the lane's limits (NEO_EMBEDDING_*)."""

    provider: ProviderKind = "hashing"
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    dimensions: int = Field(384, ge=1, le=65536)
    request_timeout_ms: int = Field(60_000, ge=1)
    # Inputs per provider request; unset: 64 for a remote provider (its slot), 4096 for the
    # local hashing embedder, whose cost per request is the store's per-add overhead, so
    # that a full 1,000-file wave (~4,000 chunks) is one add (docs/performance.md).
    batch_size: int | None = Field(None, ge=1, le=4096)
    # Concurrent requests; unset: the server's free slots where it reports them (llama.cpp's
    # /slots, /props), else 2.
    max_inflight: int | None = Field(None, ge=1, le=64)
    context_tokens: int = Field(8192, ge=16)
    admission_safety: float = Field(0.9, gt=0, le=1)
    # The token estimate where nothing counts the model's way (embedding/band.py); unset:
    # 2.3, calibrated on real code against a word-piece tokenizer (docs/performance.md);
    # 3.0 for the offline hashing embedder, which has no tokens.
    chars_per_token: float | None = Field(None, gt=0)
    # How a remote provider's inputs are counted when splitting to fit: ``auto`` (the server's
    # own tokenize endpoint where its first contact found one: llama.cpp /tokenize,
    # llama-cpp-python /extras/tokenize/count, vLLM /tokenize, TEI /tokenize; exact, so the
    # band is the limit itself with no margin; else the estimate), ``server`` (always the
    # server's; a server without one is a configuration error) or ``estimate`` (from
    # characters, above) (embedding/band.py, embedding/server_tokens.py).
    tokenizer: Literal["auto", "estimate", "server"] = "auto"
    call_ceiling_ms: int = Field(60_000, ge=1)
    strike_threshold: int = Field(2, ge=1)
    circuit_threshold: int = Field(5, ge=1)
    recovery_initial_s: float = Field(0.5, ge=0)
    recovery_max_s: float = Field(30.0, ge=0)
    recovery_max_wait_s: float = Field(120.0, ge=0)
    # Copy a vector from a row of ANOTHER tenant with the same embedding input (same
    # generation). Off: reuse stays inside the tenant. On, a tenant's sweep learns (by
    # sending fewer texts, i.e. by its timing and counts) that another tenant holds the
    # same content; no text or metadata of the other tenant is read or written.
    reuse_across_tenants: bool = False
    # Copy vectors of identical inputs at all (NEO_EMBEDDING_REUSE_VECTORS). Off: every
    # missing chunk is sent, e.g. to re-embed from a provider whose answers changed
    # without a change of model name.
    reuse_vectors: bool = True
    # How long a provider loading its model (503 "Loading model", or a port not yet open
    # at first contact) is waited for before the rest defers with PROVIDER_LOADING.
    loading_max_wait_s: float = Field(300.0, ge=0)
    # How long a port that refuses before the provider ever answered this sweep is waited
    # for (a server still starting) before the sweep fails, naming the URL and the fix.
    unreachable_wait_s: float = Field(15.0, ge=0)
    # Where the provider-wide request slots live (embedding/provider_slots.py): ``local``
    # file locks (one machine), ``ledger`` advisory locks in a Postgres ledger (every
    # machine sharing it), ``auto``: the ledger's when it is Postgres, else local.
    slots: Literal["auto", "local", "ledger"] = Field("auto", validation_alias="NEO_PROVIDER_SLOTS")
    # The local slots' directory; every process sharing a provider must see the same one.
    slots_dir: Path | None = Field(None, validation_alias="NEO_PROVIDER_SLOTS_DIR")

    _blank = field_validator("base_url", "slots_dir", mode="before")(_blank_is_unset)

    @model_validator(mode="after")
    def _provider_has_what_it_needs(self) -> "EmbeddingSettings":
        problem = provider_problem(
            self.provider, base_url=self.base_url, model=self.model, api_key=self.api_key
        )
        if problem is not None:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _server_tokenizer_needs_a_server(self) -> "EmbeddingSettings":
        if self.tokenizer == "server" and (
            self.provider != "openai_compatible" or not self.base_url
        ):
            raise ValueError(
                "NEO_EMBEDDING_TOKENIZER=server counts with an OpenAI-compatible server's "
                "tokenize endpoint: it needs NEO_EMBEDDING_PROVIDER=openai_compatible and "
                f"NEO_EMBEDDING_BASE_URL (provider is {self.provider!r}); set "
                "NEO_EMBEDDING_TOKENIZER=estimate otherwise"
            )
        return self

    @property
    def resolved_chars_per_token(self) -> float:
        if self.chars_per_token is not None:
            return self.chars_per_token
        return 3.0 if self.provider == "hashing" else CALIBRATED_CHARS_PER_TOKEN

    @property
    def resolved_batch_size(self) -> int:
        if self.batch_size is not None:
            return self.batch_size
        return 4096 if self.provider == "hashing" else 64


class SweepSettings(_Section):
    """Sources, parsing and scheduling of sweeps."""

    max_file_bytes: int = Field(1_000_000, ge=1)
    max_chunk_chars: int = Field(6000, ge=200)
    window_lines: int = Field(60, ge=5)
    default_cadence_minutes: int = Field(30, ge=1)
    # How often sweep_sensor looks for moved revisions: the largest share of commit ->
    # queryable (docs/performance.md). A tick costs a rev-parse and a ledger read per repo.
    sensor_interval_s: int = Field(5, ge=1, le=3600)
    backoff_cap_minutes: int = Field(30, ge=1)
    backoff_jitter_s: float = Field(30.0, ge=0)
    # The per-repo sweep lease: expires TTL after its last renewal (a killed sweep's lease
    # frees itself); a sweep waits at most WAIT for it, then is skipped (SWEEP_LEASE_HELD).
    sweep_lease_ttl_s: float = Field(120.0, gt=0)
    sweep_lease_wait_s: float = Field(150.0, ge=0)


class ReconcileSettings(_Section, env_prefix="NEO_RECONCILIATION_"):
    """Reconciliation (NEO_RECONCILIATION_*): classification always, deletion when enabled."""

    enabled: bool = False
    stale_gap: int = Field(2, ge=1)
    delete_batch: int = Field(500, ge=1)
    # How long a reclaim batch waits for its repo's sweep lease (a sweep of that repo
    # holds it); a batch that does not get it deletes nothing and is retried next run.
    lease_wait_s: float = Field(30.0, ge=0)


class HealthSettings(_Section):
    """The provider health canary and the freeze re-probe."""

    canary_timeout_ms: int = Field(30_000, ge=1)
    canary_ttl_s: float = Field(300.0, ge=0)
    # A failed canary is not probed again before 30 s, doubling per failure up to 10 min.
    canary_backoff_initial_s: float = Field(30.0, ge=0)
    canary_backoff_max_s: float = Field(600.0, ge=0)
    recovery_freeze_reprobe_timeout_ms: int = Field(30_000, ge=1)
    # The write path freezes when the circuit opened in this many consecutive sweeps (K).
    recovery_freeze_circuit_sweeps: int = Field(3, ge=1)
    # Freeze re-probes back off 60 s doubling up to 1 h; past the cap the record is
    # `contained` and waits for `neo-assets unfreeze`.
    recovery_freeze_reprobe_initial_s: float = Field(60.0, ge=0)
    recovery_freeze_reprobe_max_s: float = Field(3600.0, ge=0)
    recovery_freeze_reprobe_max_attempts: int = Field(12, ge=1)


class LinksSettings(_Section, env_prefix="NEO_LINKS_"):
    """Related-chunk links (NEO_LINKS_*)."""

    semantic_threshold: float = Field(0.7, ge=-1, le=1)
    top_k: int = Field(20, ge=1)
    temporal_window_s: float = Field(86_400.0, gt=0)  # files changed this close link
    temporal_per_chunk: int = Field(20, ge=0, le=1000)  # temporal links kept per chunk


class AlertsSettings(_Section):
    """Where alerts go and how they link the UI."""

    alert_webhook_url: str | None = None
    ui_base_url: str = "http://127.0.0.1:3000"  # the Dagster UI, for run links in alerts


class ServeSettings(_Section, env_prefix="NEO_SERVE_"):
    """The agents' query service (NEO_SERVE_*): limits per request and per token."""

    host: str = "127.0.0.1"
    port: int = Field(8765, ge=1, le=65535)
    max_body_bytes: int = Field(64 * 1024, ge=1024)  # a search body is a few hundred bytes
    request_timeout_s: float = Field(15.0, gt=0)  # one request's whole work, embed included
    per_token_concurrency: int = Field(4, ge=1)  # requests of one token at once; more: 429
    # How often the read-side truth looks for a new declaration or new rows (seconds).
    truth_recheck_s: float = Field(1.0, ge=0)
    hybrid: bool = True  # fuse exact identifier matches into the vector ranking
    # Served rows' vectors held to search a tenant's rows alone (MiB; 0: ask the store).
    vector_cache_mb: float = Field(512.0, ge=0)
    # What a client may hold before and while it is answered (neo_assets/serve/rules/transport.py).
    # A connection with no request being answered (a head still arriving, an idle
    # keep-alive) is closed after this long.
    header_timeout_s: float = Field(5.0, gt=0)
    max_connections_per_client: int = Field(64, ge=1)  # per client address
    # Connections with no request being answered, every address together; past it the
    # oldest pending one makes room.
    max_pending_connections: int = Field(128, ge=1)
    # Every connection together (uvicorn's limit_concurrency): past it, 503.
    max_connections: int = Field(512, ge=2)
    streams_per_token: int = Field(4, ge=1)  # open MCP GET /mcp event streams; more: 429
    stream_idle_s: float = Field(30.0, gt=0)  # a stream with no event this long is closed

    # The code tools' grep: seconds one grep may search before it answers what it found
    # (cut, truncatedBy "time"); under request_timeout_s.
    grep_timeout_s: float = Field(5.0, gt=0)

    @model_validator(mode="after")
    def _pending_leaves_room(self) -> "ServeSettings":
        if self.max_pending_connections >= self.max_connections:
            raise ValueError(
                "NEO_SERVE_MAX_PENDING_CONNECTIONS must be below NEO_SERVE_MAX_CONNECTIONS "
                f"({self.max_pending_connections} >= {self.max_connections}): idle "
                "connections would leave no room for requests"
            )
        return self


class QualitySettings(_Section, env_prefix="NEO_QUALITY_"):
    """Answer quality (NEO_QUALITY_*): the self-evaluation and the gate on switches."""

    # A new embedding generation serves a tenant only when no repo's self-evaluation is
    # worse than the serving generation's by more than the margin (MRR@10 or recall@10).
    gate: bool = True
    margin: float = Field(0.05, ge=0, le=1)
    # Measure a repo's self-evaluation at the end of a sweep that moved its revision (and
    # of the sweep that completes a generation the gate waits on).
    after_sweep: bool = True


@dataclass(frozen=True)
class Settings:
    """Every section, read at one moment. A service takes only the section it needs."""

    store: StoreSettings
    embedding: EmbeddingSettings
    sweep: SweepSettings
    reconcile: ReconcileSettings
    health: HealthSettings
    links: LinksSettings
    alerts: AlertsSettings
    serve: ServeSettings
    quality: QualitySettings


# Each section and the settings class that reads it; a section's leaves are NEO_ + its
# prefix + the leaf, upper-cased (NEO_EMBEDDING_MODEL is EmbeddingSettings.model).
SECTIONS: dict[str, type[_Section]] = {f.name: f.type for f in fields(Settings)}


def env_name(section: str, leaf: str) -> str:
    """The NEO_* variable of one leaf of one section: its own name when it has one (a
    validation alias, e.g. ``NEO_PROVIDER_SLOTS``), else the section's prefix + the leaf."""
    cls = SECTIONS[section]
    info = cls.model_fields.get(leaf)
    if info is not None and isinstance(info.validation_alias, str):
        return info.validation_alias.upper()
    if any(f.validation_alias == leaf for f in cls.model_fields.values()):
        return leaf.upper()  # an error's location names an aliased leaf by its alias
    prefix = cls.model_config.get("env_prefix", "NEO_")
    return f"{prefix}{leaf}".upper()


def _override_target(name: str) -> tuple[str, str]:
    """(section, the key its model takes) of an override named by its variable without
    NEO_ (``home``): the leaf, or its alias when it is read under one."""
    for section, cls in SECTIONS.items():
        for leaf, info in cls.model_fields.items():
            if env_name(section, leaf) == f"NEO_{name}".upper():
                alias = info.validation_alias
                return section, alias if isinstance(alias, str) else leaf
    raise TypeError(f"no setting NEO_{name.upper()}")


def _read(**overrides: object) -> Settings:
    by_section: dict[str, dict[str, object]] = {name: {} for name in SECTIONS}
    for name, value in overrides.items():
        section, leaf = _override_target(name)
        by_section[section][leaf] = value
    lines = []
    parts: dict[str, _Section] = {}
    for section, cls in SECTIONS.items():
        try:
            parts[section] = cls(**by_section[section])  # type: ignore[arg-type]
        except ValidationError as exc:
            for err in exc.errors():
                leaf = ".".join(str(p) for p in err["loc"])
                message = str(err["msg"]).removeprefix("Value error, ")
                # A rule across leaves (no leaf) or one that names its setting and value
                # says it all; a rule across leaves' input is the whole section, key and
                # all, so it is never quoted.
                if not leaf or message.startswith(env_name(section, leaf)):
                    lines.append(message)
                else:
                    lines.append(f"{env_name(section, leaf)}: {message} (got {err.get('input')!r})")
    if lines:
        raise SettingsError("invalid settings:\n  " + "\n  ".join(lines))
    return Settings(**parts)  # type: ignore[arg-type]


# Settings already read, by the NEO_* environment and overrides they were read from:
# every resource of every step asks for them, and validating is not free.
_loaded: dict[tuple[object, ...], Settings] = {}
_LOADED_MAX = 32


def load_settings(**overrides: object) -> Settings:
    """Read the environment now; raise SettingsError naming the NEO_* variable at fault.

    The result is reused while the NEO_* variables and the overrides are unchanged
    (Settings are frozen), so a changed variable is still heard by the next call."""
    key = (
        tuple(
            sorted((k.upper(), v) for k, v in os.environ.items() if k.upper().startswith("NEO_"))
        ),
        tuple(sorted((k, repr(v)) for k, v in overrides.items())),
    )
    cached = _loaded.get(key)
    if cached is not None:
        return cached
    settings = _read(**overrides)
    if len(_loaded) >= _LOADED_MAX:
        # The oldest one goes (dicts keep insertion order). Clearing them all made a
        # settings object just read miss the cache when the very next read filled it.
        del _loaded[next(iter(_loaded))]
    _loaded[key] = settings
    return settings
