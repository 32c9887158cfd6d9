"""Choosing a model by a string such as ``"openai:gpt-4.1"``.

A spec is ``provider:model``. Built-in providers are imported only when used, so each needs
only its own extra installed. ``register_provider`` adds a provider of your own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from steadyrun._errors import UsageError
from steadyrun.models._client import ModelClient

__all__ = ["ProviderFactory", "check_model_spec", "register_provider", "resolve_model"]

ProviderFactory = Callable[..., ModelClient]
"""Makes a client: called with the model part of the spec and the caller's options."""

# provider -> (module, factory name, extra that installs its SDK)
_BUILTIN: dict[str, tuple[str, str, str]] = {
    "openai": ("steadyrun.models.openai", "OpenAIChatModel", "openai"),
    "openai-responses": ("steadyrun.models.openai", "OpenAIResponsesModel", "openai"),
    "anthropic": ("steadyrun.models.anthropic", "AnthropicModel", "anthropic"),
    "google": ("steadyrun.models.google", "GoogleModel", "google"),
    "compat": ("steadyrun.models.compat", "CompatModel", "openai"),
    "local": ("steadyrun.models.local", "LocalModel", "local"),
}
_CUSTOM: dict[str, ProviderFactory] = {}


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make ``"<name>:<model>"`` specs resolve through ``factory(model, **options)``."""
    if not name or ":" in name:
        raise UsageError(f"provider name {name!r} must be non-empty and contain no ':'")
    _CUSTOM[name] = factory


def _split(spec: str) -> tuple[str, str]:
    provider, sep, model = spec.partition(":")
    if not sep or not provider or not model:
        raise UsageError(
            f"model {spec!r} is not 'provider:model'; for example 'openai:gpt-4.1', "
            "'anthropic:claude-sonnet-4-6', 'google:gemini-2.5-flash', "
            "'compat:http://localhost:11434/v1#llama3.2'"
        )
    known = sorted({*_BUILTIN, *_CUSTOM})
    if provider not in _BUILTIN and provider not in _CUSTOM:
        raise UsageError(f"unknown model provider {provider!r} in {spec!r}; known: {known}")
    return provider, model


def _factory(provider: str) -> ProviderFactory:
    if provider in _CUSTOM:
        return _CUSTOM[provider]
    module_name, attr, extra = _BUILTIN[provider]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(
            f"the {provider!r} provider needs its SDK: pip install 'steadyrun[{extra}]' ({exc})"
        ) from exc
    factory: ProviderFactory = getattr(module, attr)
    return factory


def check_model_spec(spec: str) -> None:
    """Raise ``UsageError`` now if ``spec`` cannot name a model.

    Checks the form, the provider and its extra, without creating a client (which may need an
    API key that only the deployment has).
    """
    provider, _ = _split(spec)
    _factory(provider)


def resolve_model(spec: str | ModelClient, **options: Any) -> ModelClient:
    """The client a spec names; a ``ModelClient`` is returned as it is.

    Args:
        spec: ``"provider:model"`` or a client.
        options: Passed to the provider's factory (API key, base URL, retry policy...).
    """
    if not isinstance(spec, str):
        if not isinstance(spec, ModelClient):
            raise UsageError(
                "model must be a 'provider:model' string or a ModelClient, "
                f"got {type(spec).__name__}"
            )
        return spec
    provider, model = _split(spec)
    return _factory(provider)(model, **options)
