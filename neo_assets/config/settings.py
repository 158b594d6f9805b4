"""Every tunable of the project: one typed leaf each, with its default and its NEO_* name.

Settings are read from the environment at the moment they are used (``load_settings()``
is cheap), so an operator who changes a leaf between two runs is heard on the second.
"""

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PACKAGE_DIR = Path(__file__).resolve().parents[1]
# The example shipped with the checkout (one tenant is the checkout itself).
BUNDLED_TENANTS_FILE = PACKAGE_DIR.parent / "examples" / "tenants.yaml"

ProviderKind = Literal["hashing", "openai_compatible", "ollama", "gemini", "sentence_transformers"]


class SettingsError(ValueError):
    """A NEO_* variable holds a value the project cannot use; the message names it."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="NEO_", extra="ignore", frozen=True)

    # --- where things live
    home: Path = Field(Path(".neo"), description="data root (chroma, ledger, dagster)")
    tenants_file: Path | None = Field(None, description="tenants.yaml; default ./tenants.yaml")
    # Repo paths must resolve under one of these (JSON, '["/srv/repos"]'); unset = anywhere.
    allowed_roots: list[Path] | None = Field(None, description="allowed repo roots")
    chroma_url: str | None = Field(None, description="http://host:port of a Chroma server")
    ledger_url: str | None = Field(None, description="SQLAlchemy URL of the ledger")
    collection_name: str = "neo-knowledge-base"
    # Embedded Chroma's threads share one core: its writes hand each SQLite statement
    # between two threads, and across cores that costs ~30 % (concurrency/chroma_core.py).
    chroma_one_core: bool = True
    # Before each embedded add (it holds the GIL for its whole run), let the process's
    # other threads do what they are ready to do, so the helpers they feed keep working
    # through the add (concurrency/idle_gap.py).
    chroma_gil_gap: bool = True

    # --- embedding provider
    embedding_provider: ProviderKind = "hashing"
    embedding_base_url: str | None = None
    embedding_model: str | None = None
    embedding_api_key: str | None = None
    embedding_dimensions: int = Field(384, ge=1, le=65536)
    embedding_request_timeout_ms: int = Field(60_000, ge=1)
    # Inputs per provider request; unset: 64 for a remote provider (its slot), 4096 for the
    # local hashing embedder, whose cost per request is the store's per-add overhead
    # (~60 ms a Chroma add: 8,000 rows in 512-row adds took ~1 s longer than in 2,048s),
    # so that a full 1,000-file wave (~4,000 chunks) is one add.
    embedding_batch_size: int | None = Field(None, ge=1, le=4096)
    embedding_max_inflight: int = Field(2, ge=1, le=64)
    embedding_context_tokens: int = Field(8192, ge=16)
    embedding_admission_safety: float = Field(0.9, gt=0, le=1)
    embedding_chars_per_token: float = Field(3.0, gt=0)
    embedding_call_ceiling_ms: int = Field(60_000, ge=1)
    embedding_strike_threshold: int = Field(2, ge=1)
    embedding_circuit_threshold: int = Field(5, ge=1)
    embedding_recovery_initial_s: float = Field(0.5, ge=0)
    embedding_recovery_max_s: float = Field(30.0, ge=0)
    embedding_recovery_max_wait_s: float = Field(120.0, ge=0)

    # --- sources and parsing
    max_file_bytes: int = Field(1_000_000, ge=1)
    max_chunk_chars: int = Field(6000, ge=200)
    window_lines: int = Field(60, ge=5)
    # A sweep with at least MIN files to parse parses and declares them in waves of up to
    # FILES while the lane embeds and writes the earlier waves (concurrency/chunk_waves.py); the
    # first wave has FIRST_WAVE_FILES, so the first write starts early, and each later one
    # up to core.waves.WAVE_GROWTH times the one before.
    parse_waves: bool = True
    parse_wave_min_files: int = Field(200, ge=1)
    parse_wave_files: int = Field(1000, ge=1)
    parse_first_wave_files: int = Field(150, ge=1)

    # --- scheduling
    default_cadence_minutes: int = Field(30, ge=1)
    backoff_cap_minutes: int = Field(30, ge=1)
    backoff_jitter_s: float = Field(30.0, ge=0)
    # The per-repo sweep lease: expires TTL after its last renewal (a killed sweep's lease
    # frees itself); a sweep waits at most WAIT for it, then is skipped (SWEEP_LEASE_HELD).
    sweep_lease_ttl_s: float = Field(120.0, gt=0)
    sweep_lease_wait_s: float = Field(150.0, ge=0)

    # --- reconciliation
    reconciliation_enabled: bool = False
    reconciliation_stale_gap: int = Field(2, ge=1)
    reconciliation_delete_batch: int = Field(500, ge=1)

    # --- health canary and freeze re-probe
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

    # --- links
    links_semantic_threshold: float = Field(0.7, ge=-1, le=1)
    links_top_k: int = Field(20, ge=1)
    links_temporal_window_s: float = Field(86_400.0, gt=0)  # files changed this close link
    links_temporal_per_chunk: int = Field(20, ge=0, le=1000)  # temporal links kept per chunk

    # --- alerts
    alert_webhook_url: str | None = None
    ui_base_url: str = "http://127.0.0.1:3000"  # the Dagster UI, for run links in alerts

    @field_validator(
        "chroma_url", "ledger_url", "embedding_base_url", "tenants_file", mode="before"
    )
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def resolved_batch_size(self) -> int:
        if self.embedding_batch_size is not None:
            return self.embedding_batch_size
        return 4096 if self.embedding_provider == "hashing" else 64

    # --- derived locations
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


# Settings already read, by the NEO_* environment and overrides they were read from:
# validating them costs ~15 ms, and every resource of every step asks for them.
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
    try:
        settings = Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            leaf = ".".join(str(p) for p in err["loc"])
            lines.append(f"NEO_{leaf.upper()}: {err['msg']} (got {err.get('input')!r})")
        raise SettingsError("invalid settings:\n  " + "\n  ".join(lines)) from None
    if len(_loaded) >= _LOADED_MAX:
        # The oldest one goes (dicts keep insertion order). Clearing them all made a
        # settings object just read miss the cache when the very next read filled it.
        del _loaded[next(iter(_loaded))]
    _loaded[key] = settings
    return settings
