"""The agent sections of settings: model providers, auth profiles, model aliases, the default
provider and model.

Settings documents are user ``$RHO_NOTEBOOK_HOME/settings.json`` and, only for a trusted workspace,
project ``<workspace>/.rho/settings.json`` (read by :mod:`rho_notebook.store.settings`; other
layers own other top-level keys). This module validates the keys it owns::

    {
      "providers": {
        "local":  {"type": "openai", "base_url": "http://127.0.0.1:11434/v1"},
        "openai": {"type": "openai", "api_key_env": "OPENAI_API_KEY"},
        "claude": {"type": "anthropic", "auth_profile": "anthropic-key", "max_retries": 3}
      },
      "auth_profiles": {"anthropic-key": {"api_key_env": "ANTHROPIC_API_KEY", "provider": "claude"}},
      "model_aliases": {"fast": {"provider": "local", "model": "qwen3:8b"}, "smart": {"model": "gpt-5"}},
      "default_provider": "local",
      "default_model": "qwen3:8b",
      "prices": {"openai/gpt-5": {"input_per_mtok": 1.25, "output_per_mtok": 10, "cached_input_per_mtok": 0.125}}
    }

Credentials are only ever referenced (an environment variable name, directly or through an auth
profile). A key that holds a credential value (``api_key``, ``token``, ``password``, ...), an
``api_key_env`` that is not a variable name, or a ``base_url`` with user info is rejected, and the
error never repeats the value. An agent file's ``model: "@fast"`` names the alias ``fast``; an
alias gives a model (never another alias) and optionally the provider it runs on. Project
settings override user settings per provider, profile or alias name and per default key.

``prices`` (none shipped: prices change, and a wrong one shown as fact is worse than none) prices
the run ledger (:mod:`rho_notebook.model.ledger`): ``"<provider>/<model>"`` as settings name the
provider and the model asked for -> US dollars per million input, output and (optionally) cached
input tokens. A model without a price has cost ``null``, never 0. :func:`load_prices` is what the
ledger's readers and the budgets call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError

from rho_notebook.errors import SettingsError
from rho_notebook.model.base import FrozenModel
from rho_notebook.model.ledger import Price
from rho_notebook.store.settings import settings_documents

__all__ = [
    "DEFAULT_BASE_URLS",
    "AgentSettings",
    "AuthProfile",
    "ModelAlias",
    "PriceSettings",
    "ProviderSettings",
    "ProviderType",
    "load_prices",
    "load_settings",
    "parse_settings",
]

ProviderType = Literal["openai", "anthropic"]

DEFAULT_BASE_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}
"""Base URL of each provider type when ``base_url`` is not set."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAME = re.compile(r"\S{1,128}")
_CREDENTIAL_WORDS = ("key", "token", "secret", "password", "passwd", "authorization", "bearer", "credential")
_OWNED_KEYS = ("providers", "auth_profiles", "model_aliases", "prices", "default_provider", "default_model")
_SECTIONS = ("providers", "auth_profiles", "model_aliases", "prices")
"""Owned keys that map names to entries; merged per name across documents."""


class ProviderSettings(FrozenModel):
    """One named model provider."""

    type: ProviderType
    """Wire format: ``openai`` (chat completions, also Ollama/vLLM/llama.cpp) or ``anthropic``."""
    base_url: str | None = None
    """Where the API lives; None uses :data:`DEFAULT_BASE_URLS` for the type."""
    api_key_env: str | None = None
    """Name of the environment variable holding the key (never the key itself)."""
    auth_profile: str | None = None
    """Name of an auth profile supplying the credential reference (instead of api_key_env)."""
    max_retries: int = Field(default=2, ge=0, le=10)
    """Transport retries after HTTP 429/503 (each waits for Retry-After); no other retries."""
    max_retry_wait_seconds: float = Field(default=60.0, gt=0, le=3600)
    """A Retry-After longer than this ends the attempt instead of waiting."""
    request_timeout_seconds: float = Field(default=600.0, gt=0)
    """Bound on one HTTP request; the node's timeout_seconds bounds the whole attempt."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Output token limit per response (anthropic needs one: default 8192; openai: unset)."""

    def url(self) -> str:
        """The base URL without a trailing slash."""
        return (self.base_url or DEFAULT_BASE_URLS[self.type]).rstrip("/")


class AuthProfile(FrozenModel):
    """A named credential reference an agent file can select with ``auth:``."""

    api_key_env: str
    provider: str | None = None
    """When set, the only provider this profile is valid for."""


class ModelAlias(FrozenModel):
    """What an agent file's ``model: "@<name>"`` stands for."""

    model: str
    """The model name sent to the provider (never another alias)."""
    provider: str | None = None
    """The provider the model runs on; None leaves it to the agent file or ``default_provider``."""


class PriceSettings(FrozenModel):
    """What one ``provider/model`` costs, in US dollars per million tokens (``prices``)."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cached_input_per_mtok: float | None = Field(default=None, ge=0)
    """Input tokens served from the provider's prompt cache; None: they cost the input price."""


class AgentSettings(FrozenModel):
    """The merged agent sections of every settings document that applies."""

    providers: dict[str, ProviderSettings] = {}
    auth_profiles: dict[str, AuthProfile] = {}
    model_aliases: dict[str, ModelAlias] = {}
    """Alias name without the leading ``@`` -> what it resolves to."""
    prices: dict[str, PriceSettings] = {}
    """``provider/model`` -> its price (none shipped)."""
    default_provider: str | None = None
    default_model: str | None = None
    sources: tuple[str, ...] = ()
    """Paths of the documents these settings came from (for messages)."""

    def where(self) -> str:
        """The documents read, for error messages."""
        if not self.sources:
            return "no settings file (create $RHO_NOTEBOOK_HOME/settings.json)"
        return ", ".join(self.sources)

    def provider_kinds(self) -> dict[str, str]:
        """``{provider name: type}``: the table a flow checks ``.to(provider=...)`` against
        (:func:`rho_notebook.flow.use_providers`)."""
        return {name: entry.type for name, entry in self.providers.items()}

    def price_table(self) -> dict[str, Price]:
        """``prices`` as the ledger reads them (``provider/model`` -> :class:`~rho_notebook.model.ledger.Price`)."""
        return {
            name: Price(p.input_per_mtok, p.output_per_mtok, p.cached_input_per_mtok) for name, p in self.prices.items()
        }

    def credential_env_names(self) -> set[str]:
        """Every environment variable any provider or profile names as a credential."""
        names = {p.api_key_env for p in self.providers.values() if p.api_key_env is not None}
        names.update(profile.api_key_env for profile in self.auth_profiles.values())
        return names


def load_settings(home: Path, workspace: Path | None = None, *, trusted: bool = False) -> AgentSettings:
    """Read and merge the agent sections of user settings and, when trusted, project settings.

    Parameters
    ----------
    home
        RHO_NOTEBOOK_HOME; ``home/settings.json`` is the user document (missing = empty).
    workspace
        The project root; ``.rho/settings.json`` there is read only when ``trusted``.
    trusted
        Whether the workspace is trusted. Untrusted project settings are ignored.

    Raises
    ------
    SettingsError
        A document breaks a rule; the message names the file and key and never a secret value.
    StoreError
        A document is not valid JSON or not a JSON object.
    """
    merged: dict[str, Any] = {section: {} for section in _SECTIONS}
    sources: list[str] = []
    for document in settings_documents(home, workspace, trusted=trusted):
        part = parse_settings(document.data, source=str(document.path))
        for section in _SECTIONS:
            merged[section].update(getattr(part, section))
        for key in ("default_provider", "default_model"):
            if getattr(part, key) is not None:
                merged[key] = getattr(part, key)
        sources.append(str(document.path))
    settings = AgentSettings(**merged, sources=tuple(sources))
    _check_references(settings)
    return settings


def load_prices(home: Path, workspace: Path | None = None, *, trusted: bool = False) -> dict[str, Price]:
    """The price table of the ledger: ``prices`` of user settings and, when ``trusted``, project
    settings (``provider/model`` -> :class:`~rho_notebook.model.ledger.Price`; empty when none is set).

    Raises
    ------
    SettingsError
        A document breaks a rule (the message names the file and key).
    StoreError
        A document is not valid JSON or not a JSON object.
    """
    return load_settings(home, workspace, trusted=trusted).price_table()


def parse_settings(data: Mapping[str, Any], *, source: str) -> AgentSettings:
    """Validate the agent sections of one settings document (other top-level keys are ignored)."""
    owned = {key: data[key] for key in _OWNED_KEYS if key in data}
    problems: list[str] = []
    for section in _SECTIONS:
        entries = owned.get(section, {})
        if not isinstance(entries, dict):
            problems.append(f"{section}: must be an object mapping names to settings")
            continue
        for name, entry in entries.items():
            problems.extend(_entry_problems(section, name, entry))
    for key in ("default_provider", "default_model"):
        value = owned.get(key)
        if value is not None and (not isinstance(value, str) or not _NAME.fullmatch(value)):
            problems.append(f"{key}: must be a non-empty name without whitespace")
    if not problems:
        try:
            return AgentSettings(**owned, sources=(source,))
        except ValidationError as err:
            problems.extend(_pydantic_problems(err))
    raise SettingsError(_message(source, problems))


def _entry_problems(section: str, name: str, entry: Any) -> list[str]:
    where = f"{section}.{name}"
    if not _NAME.fullmatch(name):
        return [f"{section}: the name {name!r} must be non-empty and contain no whitespace"]
    if not isinstance(entry, dict):
        return [f"{where}: must be an object"]
    if section in ("model_aliases", "prices"):
        return (_alias_problems if section == "model_aliases" else _price_problems)(name, entry)
    model = ProviderSettings if section == "providers" else AuthProfile
    problems = []
    for key in entry:
        if key in model.model_fields:
            continue
        if any(word in key.lower() for word in _CREDENTIAL_WORDS):
            problems.append(
                f"{where}.{key}: settings never hold a credential value; put the key in an "
                "environment variable and name that variable with api_key_env "
                '(e.g. "api_key_env": "OPENAI_API_KEY")'
            )
        else:
            allowed = ", ".join(model.model_fields)
            problems.append(f"{where}.{key}: unknown key; expected one of: {allowed}")
    env = entry.get("api_key_env")
    if env is not None and (not isinstance(env, str) or not _ENV_NAME.fullmatch(env)):
        problems.append(
            f"{where}.api_key_env: must be the NAME of an environment variable (letters, digits "
            "and _, not starting with a digit) that holds the key, never the key itself"
        )
    url = entry.get("base_url")
    if section == "providers" and url is not None:
        problems.extend(_url_problems(where, url))
    if section == "providers" and entry.get("api_key_env") and entry.get("auth_profile"):
        problems.append(f"{where}: set api_key_env or auth_profile, not both")
    return problems


def _alias_problems(name: str, entry: dict[str, Any]) -> list[str]:
    """An alias entry holds only ``model`` and ``provider``; neither value is ever echoed."""
    where = f"model_aliases.{name}"
    problems = []
    if name.startswith("@"):
        problems.append(
            f"model_aliases: the name {name!r} starts with @; write the alias name without it "
            '(an agent\'s model: "@fast" names the alias "fast")'
        )
    allowed = ", ".join(ModelAlias.model_fields)
    for key in entry:
        if key not in ModelAlias.model_fields:
            problems.append(f"{where}.{key}: unknown key; expected one of: {allowed}")
    model = entry.get("model")
    if model is None:
        problems.append(f"{where}.model: required; the name of the model this alias stands for")
    elif not isinstance(model, str) or not _NAME.fullmatch(model):
        problems.append(f"{where}.model: must be a non-empty model name without whitespace")
    elif model.startswith("@"):
        problems.append(f"{where}.model: names another alias; aliases do not chain, so write the model name itself")
    provider = entry.get("provider")
    if provider is not None and (not isinstance(provider, str) or not _NAME.fullmatch(provider)):
        problems.append(f"{where}.provider: must be a non-empty provider name without whitespace")
    return problems


def _price_problems(name: str, entry: dict[str, Any]) -> list[str]:
    """A price is keyed ``provider/model`` and holds non-negative numbers per million tokens."""
    where = f"prices.{name}"
    provider, _, model = name.partition("/")
    problems = []
    if not provider or not model:
        problems.append(
            f"prices: the name {name!r} must be provider/model, the provider as settings name it and the model "
            'asked for (e.g. "openai/gpt-5")'
        )
    allowed = ", ".join(PriceSettings.model_fields)
    for key in entry:
        if key not in PriceSettings.model_fields:
            problems.append(f"{where}.{key}: unknown key; expected one of: {allowed}")
    for key, field in PriceSettings.model_fields.items():
        value = entry.get(key)
        if value is None and field.is_required():
            problems.append(f"{where}.{key}: required; US dollars per million tokens")
        elif value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
            problems.append(f"{where}.{key}: must be a number of US dollars per million tokens, 0 or more")
    return problems


def _url_problems(where: str, url: Any) -> list[str]:
    if not isinstance(url, str):
        return [f"{where}.base_url: must be a string such as http://127.0.0.1:11434/v1"]
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        return [
            f"{where}.base_url: must not contain user info (user:password@); credentials are "
            "referenced with api_key_env"
        ]
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return [f"{where}.base_url: {url!r} is not an http(s) URL such as http://127.0.0.1:11434/v1"]
    if parts.query or parts.fragment:
        return [f"{where}.base_url: must not have a query or fragment (keys go in api_key_env)"]
    return []


def _pydantic_problems(err: ValidationError) -> list[str]:
    """Pydantic errors without their input values (an input may be a secret)."""
    return [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()]


def _message(source: str, problems: list[str]) -> str:
    return f"{source}: invalid agent settings:\n" + "\n".join(f"  - {p}" for p in problems)


def _check_references(settings: AgentSettings) -> None:
    problems: list[str] = []
    for name, provider in settings.providers.items():
        profile_name = provider.auth_profile
        if profile_name is None:
            continue
        profile = settings.auth_profiles.get(profile_name)
        if profile is None:
            known = ", ".join(sorted(settings.auth_profiles)) or "none"
            problems.append(
                f"providers.{name}.auth_profile: {profile_name!r} is not an auth profile "
                f"(auth_profiles defined: {known})"
            )
        elif profile.provider is not None and profile.provider != name:
            problems.append(
                f"providers.{name}.auth_profile: profile {profile_name!r} is only valid for "
                f"provider {profile.provider!r}"
            )
    for name, alias in settings.model_aliases.items():
        if alias.provider is not None and alias.provider not in settings.providers:
            known = ", ".join(sorted(settings.providers)) or "none"
            problems.append(
                f"model_aliases.{name}.provider: {alias.provider!r} is not a provider (providers defined: {known})"
            )
    if problems:
        raise SettingsError(_message(settings.where(), problems))
