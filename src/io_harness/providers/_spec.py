"""Provider specs: the short strings ``ioh --provider`` takes, turned into providers.

``openai:gpt-5-mini``, ``anthropic:claude-sonnet-4-5``, ``openrouter:VENDOR/MODEL``,
``ollama:qwen3`` (or another preset), ``compatible:URL#MODEL``, ``replay:PATH``.
A vendor without a model (``anthropic``) takes it from the environment.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from io_harness._urls import without_password, without_secret_parameters
from io_harness.errors import ConfigError
from io_harness.providers._anthropic import Anthropic
from io_harness.providers._base import Provider
from io_harness.providers._cassette import Replay
from io_harness.providers._fallback import Fallback
from io_harness.providers._openai import OpenAI, OpenAICompatible, OpenRouter
from io_harness.providers._presets import PRESETS, SPEC_FORMS

__all__ = [
    "SPEC_FORMS",
    "endpoints_of_specs",
    "provider_from_spec",
    "provider_from_specs",
    "spec_without_credentials",
]

_VENDORS: dict[str, Callable[..., Provider]] = {
    "openai": OpenAI,
    "anthropic": Anthropic,
    "openrouter": OpenRouter,
}
_VENDOR_CLASSES: dict[str, type[OpenAI] | type[Anthropic]] = {
    "openai": OpenAI,
    "anthropic": Anthropic,
    "openrouter": OpenRouter,
}


def provider_from_spec(spec: str) -> Provider:
    """The provider a spec names, e.g. ``anthropic:claude-sonnet-4-5`` or ``replay:run.jsonl``.

    Keys come from the environment (``OPENAI_API_KEY`` and so on); a missing
    one is a :class:`ConfigError` naming the variable.
    """
    return _provider(spec, {})


def _provider(spec: str, base_urls: Mapping[str, str]) -> Provider:
    """The provider of ``spec``; a vendor's base URL from ``base_urls`` (by its name) first."""
    kind, _, rest = spec.strip().partition(":")
    model = rest or None
    if kind in _VENDORS:
        return _VENDORS[kind](model, base_url=base_urls.get(kind))
    if kind in PRESETS:
        return OpenAICompatible.preset(kind, model=model)
    if kind == "compatible" and rest:
        base_url, _, model = rest.rpartition("#")
        if base_url and model and without_secret_parameters(model) != model:
            raise ConfigError(
                f"provider {spec_without_credentials(spec)!r}: what follows the last # is the "
                "model, and this one reads as a URL's secret parameter; write "
                "compatible:URL#MODEL"
            )
        if base_url and model:
            return OpenAICompatible(model, base_url=base_url)
        shown = spec_without_credentials(spec)
        raise ConfigError(f"provider {shown!r}: write compatible:URL#MODEL")
    if kind == "replay" and rest:
        return Replay(rest)
    shown = spec_without_credentials(spec)
    raise ConfigError(f"unknown provider {shown!r}; give one of: {', '.join(SPEC_FORMS)}")


_URL_START = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")


def spec_without_credentials(spec: str) -> str:
    """``spec`` as messages and the store show it: the URL in it (``compatible:URL#MODEL``)
    without its credentials (:func:`~io_harness._urls.without_password`), the model
    without a secret parameter a URL's fragment put there, the rest as given. A spec that
    holds no URL is returned stripped."""
    spec = spec.strip()
    found = _URL_START.search(spec)
    if found is None:
        return spec
    # The model follows the last "#", as provider_from_spec reads it.
    url, hash_, model = spec[found.start() :].rpartition("#")
    if not hash_:
        url, model = model, ""
    # A URL's fragment taken for the model may still be a secret parameter (#token=...).
    return spec[: found.start()] + without_password(url) + hash_ + without_secret_parameters(model)


def provider_from_specs(
    specs: Sequence[str], base_urls: Mapping[str, str] | None = None
) -> Provider:
    """One spec's provider, or a :class:`Fallback` over several, in the order given.

    ``base_urls`` gives a vendor (by its name: ``anthropic``) the base URL a
    resumed run started with, over the environment's.
    """
    if not specs:
        raise ConfigError(f"no provider given; give one of: {', '.join(SPEC_FORMS)}")
    providers = [_provider(spec, base_urls or {}) for spec in specs]
    return providers[0] if len(providers) == 1 else Fallback(*providers)


def endpoints_of_specs(specs: Sequence[str]) -> tuple[str, ...]:
    """The hosts the providers ``specs`` name would dial, each once.

    A vendor's key and model do not change where it connects, so neither is
    needed here (``ioh policy explain --provider``); its base URL still comes
    from the environment, as it would for a run.
    """
    found: list[str] = []
    for spec in specs:
        kind, _, rest = spec.strip().partition(":")
        if kind in _VENDOR_CLASSES:
            provider: Provider = _VENDOR_CLASSES[kind](rest or "any", api_key="not-needed")
        else:
            provider = provider_from_spec(spec)
        found.extend(provider.endpoints())
    return tuple(dict.fromkeys(found))
