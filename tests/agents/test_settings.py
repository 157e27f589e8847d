"""Agent settings: the shape, credentials only by reference (never echoed), user and project layers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.agents.settings import load_settings, parse_settings
from rho_notebook.errors import SettingsError, StoreError

LITERAL = "sk-live-abcdefghijklmnop"


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_full_shape(tmp_path: Path) -> None:
    write(
        tmp_path / "settings.json",
        {
            "providers": {
                "local": {"type": "openai", "base_url": "http://127.0.0.1:11434/v1"},
                "openai": {"type": "openai", "api_key_env": "OPENAI_API_KEY", "max_retries": 3},
                "claude": {"type": "anthropic", "auth_profile": "anthropic-key", "max_tokens": 4096},
            },
            "auth_profiles": {"anthropic-key": {"api_key_env": "ANTHROPIC_API_KEY", "provider": "claude"}},
            "default_provider": "local",
            "default_model": "qwen3:8b",
            "hooks": {"before_tool_use": []},  # owned by another layer: ignored here
        },
    )
    settings = load_settings(tmp_path)
    assert settings.default_provider == "local" and settings.default_model == "qwen3:8b"
    assert settings.providers["local"].url() == "http://127.0.0.1:11434/v1"
    assert settings.providers["openai"].url() == "https://api.openai.com/v1"
    assert settings.providers["claude"].url() == "https://api.anthropic.com"
    assert settings.providers["openai"].max_retries == 3 and settings.providers["local"].max_retries == 2
    assert settings.credential_env_names() == {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}
    assert settings.sources == (str(tmp_path / "settings.json"),)


def test_no_settings_file_is_empty_settings(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    assert settings.providers == {} and settings.default_provider is None
    assert "no settings file" in settings.where()


@pytest.mark.parametrize("key", ["api_key", "apiKey", "token", "access_token", "password", "secret", "authorization"])
def test_a_literal_credential_is_rejected_without_echo(tmp_path: Path, key: str) -> None:
    write(tmp_path / "settings.json", {"providers": {"openai": {"type": "openai", key: LITERAL}}})
    with pytest.raises(SettingsError) as caught:
        load_settings(tmp_path)
    message = caught.value.message
    assert f"providers.openai.{key}: settings never hold a credential value" in message
    assert "api_key_env" in message and str(tmp_path / "settings.json") in message
    assert LITERAL not in message


def test_a_key_given_as_api_key_env_is_rejected_without_echo(tmp_path: Path) -> None:
    write(tmp_path / "settings.json", {"providers": {"openai": {"type": "openai", "api_key_env": LITERAL}}})
    with pytest.raises(SettingsError) as caught:
        load_settings(tmp_path)
    assert "must be the NAME of an environment variable" in caught.value.message
    assert LITERAL not in caught.value.message


def test_user_info_in_base_url_is_rejected_without_echo(tmp_path: Path) -> None:
    url = f"https://me:{LITERAL}@api.example.com/v1"
    with pytest.raises(SettingsError) as caught:
        parse_settings({"providers": {"x": {"type": "openai", "base_url": url}}}, source="s.json")
    assert "must not contain user info" in caught.value.message and LITERAL not in caught.value.message


def test_credential_in_an_auth_profile_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings({"auth_profiles": {"p": {"api_key_env": "K", "key": LITERAL}}}, source="s.json")
    assert "auth_profiles.p.key: settings never hold a credential value" in caught.value.message
    assert LITERAL not in caught.value.message


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"providers": {"x": {"type": "grpc"}}}, "providers.x.type: Input should be 'openai' or 'anthropic'"),
        (
            {"providers": {"x": {"type": "openai", "model": "m"}}},
            "providers.x.model: unknown key; expected one of: type, base_url",
        ),
        (
            {"providers": {"x": {"type": "openai", "max_retries": 99}}},
            "providers.x.max_retries: Input should be less than or equal to 10",
        ),
        ({"providers": {"x": {"type": "openai", "base_url": "ftp://h"}}}, "is not an http(s) URL"),
        (
            {"providers": {"x": {"type": "openai", "api_key_env": "A", "auth_profile": "p"}}},
            "set api_key_env or auth_profile, not both",
        ),
        ({"providers": []}, "providers: must be an object"),
        ({"default_model": "two words"}, "default_model: must be a non-empty name without whitespace"),
    ],
)
def test_invalid_settings(data: dict[str, Any], expected: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings(data, source="/home/u/settings.json")
    assert expected in caught.value.message
    assert caught.value.message.startswith("/home/u/settings.json: invalid agent settings:")


def test_auth_profile_references_are_checked(tmp_path: Path) -> None:
    write(tmp_path / "settings.json", {"providers": {"x": {"type": "openai", "auth_profile": "missing"}}})
    with pytest.raises(SettingsError, match="'missing' is not an auth profile"):
        load_settings(tmp_path)
    write(
        tmp_path / "settings.json",
        {
            "providers": {"x": {"type": "openai", "auth_profile": "p"}},
            "auth_profiles": {"p": {"api_key_env": "K", "provider": "y"}},
        },
    )
    with pytest.raises(SettingsError, match="profile 'p' is only valid for provider 'y'"):
        load_settings(tmp_path)


def test_not_json_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text("{nope")
    with pytest.raises(StoreError, match="not valid JSON"):
        load_settings(tmp_path)


def test_project_settings_apply_only_when_trusted(tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "ws"
    write(
        home / "settings.json",
        {"providers": {"local": {"type": "openai"}}, "default_provider": "local", "default_model": "a"},
    )
    write(
        workspace / ".rho" / "settings.json",
        {"providers": {"local": {"type": "anthropic"}, "extra": {"type": "openai"}}, "default_model": "b"},
    )
    untrusted = load_settings(home, workspace)
    assert untrusted.providers["local"].type == "openai" and "extra" not in untrusted.providers
    assert untrusted.default_model == "a"
    trusted = load_settings(home, workspace, trusted=True)
    assert trusted.providers["local"].type == "anthropic" and "extra" in trusted.providers
    assert (trusted.default_provider, trusted.default_model) == ("local", "b")
    assert len(trusted.sources) == 2


def test_the_example_settings_file_is_valid() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "agents" / "settings.example.json"
    settings = parse_settings(json.loads(example.read_text()), source=str(example))
    assert settings.default_provider in settings.providers
