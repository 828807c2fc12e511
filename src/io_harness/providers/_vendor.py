"""What the vendor providers share: settings, endpoint, tool arguments, a stream's answer."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from urllib.parse import urlsplit

from io_harness._arguments import parse_arguments
from io_harness._urls import without_password
from io_harness.errors import ConfigError, ProviderError
from io_harness.messages import CompletionResponse, StreamDelta

__all__ = ["VendorSettings", "endpoint_of", "final_answer", "parse_arguments", "vendor_settings"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class VendorSettings:
    """A vendor provider's settings, each from its argument or else the environment."""

    api_key: str | None
    model: str
    base_url: str
    endpoint: str
    """``host:port`` the provider dials."""
    timeout: float


def vendor_settings(
    *,
    model: str | None,
    api_key: str | None,
    base_url: str | None,
    timeout: float,
    key_env: str,
    model_env: str,
    url_env: str,
    default_url: str | None,
    key_required: bool = True,
) -> VendorSettings:
    """Arguments first, then the environment; a missing one is a ConfigError naming its variable."""
    key = api_key or os.environ.get(key_env) or None
    if key is None and key_required:
        raise ConfigError(
            f"no API key: pass api_key= or set {key_env}", shell=f"no API key: set {key_env}"
        )
    chosen = model or os.environ.get(model_env) or None
    if chosen is None:
        raise ConfigError(
            f"no model: pass model= or set {model_env}",
            shell=f"no model: name one in the provider spec (KIND:MODEL) or set {model_env}",
        )
    url = base_url or os.environ.get(url_env) or default_url
    if not url:
        raise ConfigError(
            f"no base URL: pass base_url= or set {url_env}", shell=f"no base URL: set {url_env}"
        )
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigError(f"timeout must be a positive number of seconds, not {timeout!r}")
    url = url.rstrip("/")
    return VendorSettings(key, chosen, url, endpoint_of(url, url_env), float(timeout))


def endpoint_of(base_url: str, url_env: str = "the base URL variable") -> str:
    """``host:port`` of a base URL, the port defaulted from its scheme."""
    shown = without_password(base_url)
    try:
        parts = urlsplit(base_url)
    except ValueError:  # a bad IPv6 literal, say
        parts = None
    scheme = parts.scheme.lower() if parts is not None else ""
    if parts is None or scheme not in _DEFAULT_PORTS or not parts.hostname:
        wrong = f"base URL {shown!r} is not an http:// or https:// URL with a host"
        raise ConfigError(
            f"{wrong} (check base_url= or {url_env})", shell=f"{wrong} (check {url_env})"
        )
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        raise ConfigError(f"base URL {shown!r} has a bad port") from None
    host = parts.hostname
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    return f"{host}:{port}"


async def final_answer(
    stream: AsyncGenerator[StreamDelta | CompletionResponse, None],
) -> CompletionResponse:
    """The answer a provider's stream ends with; its deltas are passed over."""
    async with contextlib.aclosing(stream) as items:
        async for item in items:
            if isinstance(item, CompletionResponse):
                return item
    raise ProviderError("bad_response", "the answer stream ended without a response")
