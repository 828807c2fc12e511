"""Provider specs: the short strings ``ioh --provider`` takes, turned into providers."""

from __future__ import annotations

from io_harness.errors import ConfigError
from io_harness.providers._base import Provider
from io_harness.providers._cassette import Replay

__all__ = ["SPEC_FORMS", "provider_from_spec"]

SPEC_FORMS = ("replay:CASSETTE.jsonl",)
"""The forms a spec may take, as shown in help and errors."""


def provider_from_spec(spec: str) -> Provider:
    """The provider a spec names, e.g. ``replay:runs/fix.jsonl``."""
    kind, _, rest = spec.partition(":")
    if kind == "replay" and rest:
        return Replay(rest)
    raise ConfigError(f"unknown provider {spec!r}; give one of: {', '.join(SPEC_FORMS)}")
