"""Settings are read from the environment, reused while it is unchanged."""

import pytest

from neo_assets.settings import Settings, SettingsError, load_settings


def test_a_changed_variable_is_heard_by_the_next_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEO_MAX_FILE_BYTES", "1000")
    first = load_settings()
    assert first.max_file_bytes == 1000
    assert load_settings() is first  # unchanged environment: the same frozen object
    monkeypatch.setenv("NEO_MAX_FILE_BYTES", "2000")
    assert load_settings().max_file_bytes == 2000
    monkeypatch.delenv("NEO_MAX_FILE_BYTES")
    assert load_settings().max_file_bytes == Settings.model_fields["max_file_bytes"].default


def test_overrides_are_part_of_the_key(tmp_path) -> None:
    a = load_settings(home=tmp_path / "a")
    b = load_settings(home=tmp_path / "b")
    assert a.home_dir != b.home_dir
    assert load_settings(home=tmp_path / "a") is a


def test_an_invalid_variable_is_refused_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEO_MAX_FILE_BYTES", "lots")
    for _ in range(2):  # a refusal is never cached as a success
        with pytest.raises(SettingsError, match="NEO_MAX_FILE_BYTES"):
            load_settings()
