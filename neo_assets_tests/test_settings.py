"""Settings are read from the environment, reused while it is unchanged."""

import pytest

from neo_assets.config.settings import SettingsError, SweepSettings, load_settings


def test_a_changed_variable_is_heard_by_the_next_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEO_MAX_FILE_BYTES", "1000")
    first = load_settings()
    assert first.sweep.max_file_bytes == 1000
    assert load_settings() is first  # unchanged environment: the same frozen object
    monkeypatch.setenv("NEO_MAX_FILE_BYTES", "2000")
    assert load_settings().sweep.max_file_bytes == 2000
    monkeypatch.delenv("NEO_MAX_FILE_BYTES")
    assert (
        load_settings().sweep.max_file_bytes == SweepSettings.model_fields["max_file_bytes"].default
    )


def test_overrides_are_part_of_the_key(tmp_path) -> None:
    a = load_settings(home=tmp_path / "a")
    b = load_settings(home=tmp_path / "b")
    assert a.store.home_dir != b.store.home_dir
    assert load_settings(home=tmp_path / "a") is a


def test_an_invalid_variable_is_refused_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEO_MAX_FILE_BYTES", "lots")
    for _ in range(2):  # a refusal is never cached as a success
        with pytest.raises(SettingsError, match="NEO_MAX_FILE_BYTES"):
            load_settings()


def test_the_hashing_embedder_writes_in_big_batches_a_remote_one_in_its_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_settings().embedding.resolved_batch_size == 4096
    monkeypatch.setenv("NEO_EMBEDDING_PROVIDER", "openai_compatible")
    monkeypatch.setenv("NEO_EMBEDDING_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("NEO_EMBEDDING_MODEL", "m")
    assert load_settings().embedding.resolved_batch_size == 64
    monkeypatch.setenv("NEO_EMBEDDING_BATCH_SIZE", "100")
    assert load_settings().embedding.resolved_batch_size == 100


def test_a_full_cache_forgets_its_oldest_settings_not_the_latest(tmp_path) -> None:
    import neo_assets.config.settings as settings_mod

    settings_mod._loaded.clear()
    first = load_settings(home=tmp_path / "first")
    for i in range(settings_mod._LOADED_MAX - 2):
        load_settings(home=tmp_path / f"h{i}")
    latest = load_settings(home=tmp_path / "latest")  # the cache is full now
    load_settings(home=tmp_path / "one-more")  # evicts the oldest: ``first``
    assert load_settings(home=tmp_path / "latest") is latest
    assert load_settings(home=tmp_path / "first") is not first
    assert len(settings_mod._loaded) == settings_mod._LOADED_MAX


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("NEO_PROVIDER_SLOTS", "bogus"),
        ("NEO_EMBEDDING_TOKENIZER", "x"),
        ("NEO_MAX_FILE_BYTES", "x"),
    ],
)
def test_a_refused_variable_is_named_as_the_user_spells_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    # Leaves read under their own name (a validation alias) are named by it, not by their
    # section's prefix plus the alias.
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as refused:
        load_settings()
    (line,) = str(refused.value).splitlines()[1:]
    assert line.strip().startswith(f"{variable}: "), line


def test_an_alias_leaf_can_be_overridden_by_its_own_name(tmp_path) -> None:
    assert load_settings(provider_slots="ledger").embedding.slots == "ledger"


@pytest.mark.parametrize(
    ("env", "named"),
    [
        (
            {"NEO_EMBEDDING_PROVIDER": "openai_compatible", "NEO_EMBEDDING_API_KEY": "sk-secret"},
            "NEO_EMBEDDING_BASE_URL",
        ),
        (
            {
                "NEO_EMBEDDING_PROVIDER": "ollama",
                "NEO_EMBEDDING_BASE_URL": "http://x",
                "NEO_EMBEDDING_API_KEY": "sk-secret",
            },
            "NEO_EMBEDDING_MODEL",
        ),
        (
            {"NEO_EMBEDDING_PROVIDER": "gemini", "NEO_EMBEDDING_MODEL": "m"},
            "NEO_EMBEDDING_API_KEY",
        ),
        (
            {
                "NEO_EMBEDDING_PROVIDER": "openai_compatible",
                "NEO_EMBEDDING_BASE_URL": "localhost:8080",
                "NEO_EMBEDDING_MODEL": "m",
                "NEO_EMBEDDING_API_KEY": "sk-secret",
            },
            "NEO_EMBEDDING_BASE_URL must be an http(s) URL",
        ),
    ],
)
def test_a_provider_missing_what_it_needs_is_refused_at_load(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], named: str
) -> None:
    # Refused with the settings, before any command or run builds the provider; the line
    # names the setting and quotes no other value (the key least of all).
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SettingsError) as refused:
        load_settings()
    message = str(refused.value)
    assert named in message and "sk-secret" not in message and "Value error" not in message


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("NEO_CHROMA_URL", "bogus", "NEO_CHROMA_URL must look like http://host:port"),
        ("NEO_LEDGER_URL", "notaurl", "NEO_LEDGER_URL: not a SQLAlchemy database URL"),
    ],
)
def test_a_store_address_of_the_wrong_shape_is_refused_at_load(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, said: str
) -> None:
    # Before: a raw traceback from the first command that opened the store.
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match=said):
        load_settings()
