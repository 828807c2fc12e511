"""What the vendor providers share: settings, endpoint, tool arguments, a stream's answer."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from urllib.parse import urlsplit

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
    parts = urlsplit(base_url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        wrong = f"base URL {base_url!r} is not an http:// or https:// URL with a host"
        raise ConfigError(
            f"{wrong} (check base_url= or {url_env})", shell=f"{wrong} (check {url_env})"
        )
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        raise ConfigError(f"base URL {base_url!r} has a bad port") from None
    host = parts.hostname
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    return f"{host}:{port}"


def parse_arguments(raw: str) -> dict[str, object] | str:
    """A tool call's arguments: the JSON object, ``{}`` for nothing, else the raw text.

    Raw text reaches the loop as it came, and the model is told its call was
    not a JSON object instead of the tool running. Text that is not valid
    Unicode (a lone surrogate, which JSON escapes can spell) is raw text with
    the bad characters escaped, so nothing downstream fails to store it.
    """
    if not _encodable(raw):
        return raw.encode("utf-8", "backslashreplace").decode("utf-8")
    if not raw.strip():
        return {}
    try:
        parsed: object = json.loads(raw)
    except (ValueError, RecursionError):
        return raw
    if not isinstance(parsed, dict):
        return raw
    arguments = {str(key): value for key, value in parsed.items()}
    return arguments if _encodable(json.dumps(arguments, ensure_ascii=False)) else raw


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


async def final_answer(
    stream: AsyncGenerator[StreamDelta | CompletionResponse, None],
) -> CompletionResponse:
    """The answer a provider's stream ends with; its deltas are passed over."""
    async with contextlib.aclosing(stream) as items:
        async for item in items:
            if isinstance(item, CompletionResponse):
                return item
    raise ProviderError("bad_response", "the answer stream ended without a response")
