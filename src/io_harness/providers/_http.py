"""What every HTTP provider shares: the client the harness owns and the error mapping.

The vendor SDKs (``openai``, ``anthropic``) speak HTTP through an
``httpx2.AsyncClient`` the harness builds here: timeouts set, redirects off,
no proxy settings read from the environment, and every request through the
net check of :mod:`io_harness._net` (the provider's own connections), so that
one place decides where a provider may connect. SDK retries are off
everywhere: the loop retries and records each attempt.

:class:`PerLoopClient` keeps one such client per event loop and closes it
with that loop, so a provider works across several ``asyncio.run`` calls.

Every failure an SDK or the transport raises becomes a
:class:`~io_harness.errors.ProviderError` in :func:`provider_error`, with any
API key scrubbed from its message before it can reach the store or a cassette.

Nothing here imports an SDK or ``httpx2`` at module import: they load when a
client is first built, so ``import io_harness`` stays fast.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import sys
import time
import weakref
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from io_harness.errors import ProviderError, ProviderErrorKind, RefusedError

if TYPE_CHECKING:
    import anthropic
    import httpx2
    import openai

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "PerLoopClient",
    "body_message",
    "harness_client",
    "is_context_overflow",
    "provider_error",
    "redact",
    "retry_after_seconds",
    "status_error",
    "status_kind",
    "stream_error_kind",
]

DEFAULT_TIMEOUT_SECONDS = 120.0
"""How long a provider waits to connect, and for each piece of an answer to arrive."""
_CONNECT_SECONDS = 10.0
_MESSAGE_CHARS = 500

# What vendors say when a prompt does not fit the model's context window.
_OVERFLOW_MARKERS = (
    "context_length_exceeded",  # OpenAI's error code
    "maximum context length",  # OpenAI, OpenRouter, vLLM
    "prompt is too long",  # Anthropic
    "context window",  # Anthropic, llama.cpp
    "exceeds the context",  # llama.cpp, LM Studio
    "context length",  # Ollama and other compatible servers
    "too many tokens",
    "input is too long",
)

# What the ``code`` or ``type`` of an error sent inside a stream (OpenAI-family) means.
_NAMED_KINDS: dict[str, ProviderErrorKind] = {
    "rate_limit_exceeded": "rate_limited",
    "rate_limit_error": "rate_limited",
    "insufficient_quota": "bad_request",
    "invalid_api_key": "auth",
    "authentication_error": "auth",
    "permission_error": "auth",
    "invalid_request_error": "bad_request",
    "not_found_error": "bad_request",
    "model_not_found": "bad_request",
    "server_error": "server",
    "overloaded_error": "server",
}

_QUOTA_MARKER = "insufficient_quota"
"""OpenAI's code for a 429 that is no rate limit: the account's quota is spent."""

_SDK = TypeVar("_SDK")


def harness_client(timeout: float = DEFAULT_TIMEOUT_SECONDS) -> httpx2.AsyncClient:
    """The HTTP client a provider's SDK uses: checked, bounded waits, no redirects, no env proxies.

    Each request is decided by the net check as one of the provider's own
    connections (:func:`io_harness._net.checked_async_client`).
    """
    import httpx2

    from io_harness._net import checked_async_client

    return checked_async_client(
        for_provider=True, timeout=httpx2.Timeout(timeout, connect=min(timeout, _CONNECT_SECONDS))
    )


class PerLoopClient(Generic[_SDK]):
    """One SDK client per event loop: made on first use there, closed when that loop shuts down.

    Connections belong to the loop that opened them, so each loop (each
    ``asyncio.run``) needs its own client, and a client nobody closed must
    still be closed on its loop or its sockets leak. :meth:`aclose` closes sooner.
    """

    def __init__(self) -> None:
        self._sdk: _SDK | None = None
        self._http: httpx2.AsyncClient | None = None
        self._closer: AsyncGenerator[None, None] | None = None
        self._loop: weakref.ref[asyncio.AbstractEventLoop] | None = None

    @property
    def current(self) -> _SDK | None:
        """The SDK client last made; None before the first :meth:`get` and after :meth:`aclose`."""
        return self._sdk

    async def get(self, make: Callable[[], tuple[_SDK, httpx2.AsyncClient]]) -> _SDK:
        """The SDK client for the running event loop, made by ``make`` on first use there.

        ``make`` returns the SDK client and the HTTP client it speaks through (closed here).
        """
        loop = asyncio.get_running_loop()
        if (
            self._sdk is not None
            and self._http is not None
            and self._made_on() is loop
            and not self._http.is_closed
        ):
            return self._sdk
        sdk, http = make()
        # A started async generator, not a task waiting to be cancelled: the loop holds it
        # weakly and closes it in shutdown_asyncgens() (asyncio.run, every Runner), and if
        # it is dropped sooner its finalizer schedules the close on its own loop. A keeper
        # task whose holder is collected mid-loop is destroyed pending with nothing closed,
        # a bare shutdown_asyncgens() never closes it, and gather(*all_tasks()) waits on it.
        closer = _closed_with_the_loop(http)
        await anext(closer)
        self._sdk, self._http, self._closer = sdk, http, closer
        self._loop = weakref.ref(loop)
        return sdk

    async def aclose(self) -> None:
        """Close the client now if it is this loop's; the next :meth:`get` makes a new one."""
        closer, made_on = self._closer, self._made_on()
        self._sdk = self._http = self._closer = self._loop = None
        if closer is None:
            return
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None and running is made_on:
            await closer.aclose()
        # A client of another loop was closed when that loop shut down, or is left to it.

    def _made_on(self) -> asyncio.AbstractEventLoop | None:
        return self._loop() if self._loop is not None else None


async def _closed_with_the_loop(http: httpx2.AsyncClient) -> AsyncGenerator[None, None]:
    """Holds ``http`` open until closed: by :meth:`PerLoopClient.aclose`, or by its event loop."""
    try:
        yield
    finally:
        await http.aclose()


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret in ``secrets`` replaced by ``[redacted]``."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    return text


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, else ``Retry-After`` (seconds or date)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def is_context_overflow(message: str) -> bool:
    """Whether a vendor's error message says the prompt does not fit the context window."""
    lowered = message.lower()
    return any(marker in lowered for marker in _OVERFLOW_MARKERS)


def _clip(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= _MESSAGE_CHARS:
        return text
    return f"{text[:_MESSAGE_CHARS]}... [+{len(text) - _MESSAGE_CHARS} chars]"


def body_message(body: object, secrets: Iterable[str | None] = ()) -> str:
    """The human part of an error body (its ``error.message``, else the body), secrets scrubbed.

    Scrubbing comes before clipping, so a key cut in half by the clip cannot survive.
    """
    return _clip(redact(_body_text(body), secrets))


def _body_text(body: object) -> str:
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if isinstance(body, str):
        text = body
        try:
            body = json.loads(text)
        except ValueError:
            return text
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):
            parts = [str(error[key]) for key in ("message", "code", "type") if error.get(key)]
            if parts:
                return " | ".join(parts)
        elif isinstance(error, str):
            return str(error)
    return json.dumps(body, default=str)


def status_error(
    status: int,
    message: str,
    headers: Mapping[str, str] | None = None,
    *,
    secrets: Iterable[str | None] = (),
) -> ProviderError:
    """The error an HTTP status and its message amount to.

    429 is ``rate_limited`` (with ``Retry-After``), but a 429 whose code says
    the account's quota is spent (OpenAI's ``insufficient_quota``) is
    ``bad_request``: waiting does not mend it; 401/403 are ``auth``, 408
    ``timeout``, 5xx and Anthropic's 529 ``server``; any status whose message
    says the prompt is too long is ``context_overflow``; other 4xx (400, 404
    for an unknown model, 422), and a redirect (never followed; the message
    names where it leads), are ``bad_request``.
    """
    location = _location(headers) if 300 <= status < 400 else None
    if location is not None:
        message = (
            f"the server redirects to {location}; the harness follows no redirects, "
            f"so give the provider the URL it leads to as base_url ({message})"
        )
    message = _clip(redact(message, secrets))
    retry_after = retry_after_seconds(headers) if headers is not None else None
    return ProviderError(
        status_kind(status, message), message, status=status, retry_after=retry_after
    )


def status_kind(status: int, message: str) -> ProviderErrorKind:
    """The kind of failure an HTTP ``status`` with ``message`` is (see :func:`status_error`)."""
    if is_context_overflow(message) and status in (400, 413, 422, 500):
        return "context_overflow"
    if status == 429:
        return "bad_request" if _QUOTA_MARKER in message.lower() else "rate_limited"
    if status in (401, 403):
        return "auth"
    if status == 408:
        return "timeout"
    return "server" if status >= 500 else "bad_request"


def stream_error_kind(body: object, message: str) -> ProviderErrorKind:
    """The kind of an error a server sent inside a stream of an otherwise good answer.

    Its ``code`` decides: an HTTP status (OpenRouter sends 401, 429, 502...)
    as :func:`status_kind` reads one, else a named code or ``type``
    (``rate_limit_exceeded``, ``invalid_api_key``...); what names neither is
    ``server``. A message saying the prompt is too long is ``context_overflow``.
    """
    if is_context_overflow(message):
        return "context_overflow"
    error = body.get("error", body) if isinstance(body, Mapping) else None
    if not isinstance(error, Mapping):
        return "server"
    code = error.get("code")
    if isinstance(code, str) and code.isdigit():
        code = int(code)
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code < 600:
        return status_kind(code, message)
    for name in (code, error.get("type")):
        if isinstance(name, str) and name.lower() in _NAMED_KINDS:
            return _NAMED_KINDS[name.lower()]
    return "server"


def _location(headers: Mapping[str, str] | None) -> str:
    found = {key.lower(): value for key, value in (headers or {}).items()}.get("location")
    return repr(found) if found else "a location it does not name"


def _refused(exc: BaseException) -> RefusedError | None:
    """The net check's refusal ``exc`` is or wraps (an SDK may wrap it as a connection error)."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None or isinstance(seen, RefusedError):
            return seen
        seen = seen.__cause__
    return None


@dataclass(frozen=True)
class _LoadedErrors:
    """The exception classes of the SDKs and the transport this process has imported.

    :func:`provider_error` looks only for these. An exception of a module never
    imported cannot exist, so leaving that module out changes no answer, and it
    spares importing a whole SDK (about a second) to fail an ``isinstance`` check.
    """

    status: tuple[type[openai.APIStatusError] | type[anthropic.APIStatusError], ...]
    timeout: tuple[type[Exception], ...]
    broken: tuple[type[Exception], ...]
    connection: tuple[type[openai.APIConnectionError] | type[anthropic.APIConnectionError], ...]
    transport: tuple[type[Exception], ...]
    api: tuple[type[openai.APIError] | type[anthropic.APIError], ...]

    @classmethod
    def now(cls) -> _LoadedErrors:
        status: list[type[openai.APIStatusError] | type[anthropic.APIStatusError]] = []
        timeout: list[type[Exception]] = []
        broken: list[type[Exception]] = []
        connection: list[type[openai.APIConnectionError] | type[anthropic.APIConnectionError]] = []
        transport: list[type[Exception]] = []
        api: list[type[openai.APIError] | type[anthropic.APIError]] = []
        if "openai" in sys.modules:
            import openai

            status.append(openai.APIStatusError)
            timeout.append(openai.APITimeoutError)
            connection.append(openai.APIConnectionError)
            api.append(openai.APIError)
        if "anthropic" in sys.modules:
            import anthropic

            status.append(anthropic.APIStatusError)
            timeout.append(anthropic.APITimeoutError)
            connection.append(anthropic.APIConnectionError)
            api.append(anthropic.APIError)
        if "httpx2" in sys.modules:
            import httpx2

            timeout.append(httpx2.TimeoutException)
            broken.extend((httpx2.RemoteProtocolError, httpx2.DecodingError, httpx2.SSEError))
            transport.append(httpx2.TransportError)
        return cls(
            status=tuple(status),
            timeout=tuple(timeout),
            broken=tuple(broken),
            connection=tuple(connection),
            transport=tuple(transport),
            api=tuple(api),
        )


def provider_error(exc: BaseException, *, secrets: Iterable[str | None] = ()) -> ProviderError:
    """What an exception raised by an SDK or the transport means, as a typed error."""
    if isinstance(exc, ProviderError):
        return exc
    secrets = tuple(secrets)
    refused = _refused(exc)
    if refused is not None:  # the policy's answer: another attempt gets the same one
        return ProviderError("refused", redact(str(refused), secrets))
    loaded = _LoadedErrors.now()
    if isinstance(exc, loaded.status):
        message = body_message(exc.body if exc.body is not None else str(exc), secrets)
        return status_error(exc.status_code, message, dict(exc.response.headers), secrets=secrets)
    if isinstance(exc, loaded.timeout):
        return ProviderError("timeout", redact(f"the request timed out: {exc}", secrets))
    if isinstance(exc.__cause__, loaded.broken) and isinstance(exc, loaded.connection):
        exc = exc.__cause__  # an SDK wraps a stream that broke off as a connection error
    if isinstance(exc, loaded.broken):
        return ProviderError(
            "bad_response", redact(f"the response stream broke off or is malformed: {exc}", secrets)
        )
    if isinstance(exc, loaded.connection + loaded.transport):
        cause = exc.__cause__ or exc
        message = f"could not reach the server: {type(cause).__name__}: {cause}"
        return ProviderError("network", redact(message, secrets))
    if isinstance(exc, loaded.api):
        # An error the server sent inside an otherwise good stream.
        message = body_message(exc.body if exc.body is not None else str(exc), secrets)
        return ProviderError(stream_error_kind(exc.body, message), redact(message, secrets))
    if isinstance(exc, ValueError):  # JSON that does not parse, a field of the wrong shape
        return ProviderError(
            "bad_response", redact(f"the server's answer is malformed: {exc}", secrets)
        )
    return ProviderError(
        "bad_response", redact(f"the SDK failed: {type(exc).__name__}: {exc}", secrets)
    )
