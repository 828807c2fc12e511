"""What every HTTP provider shares: the client the harness owns and the error mapping.

The vendor SDKs (``openai``, ``anthropic``) speak HTTP through an
``httpx2.AsyncClient`` the harness builds here: timeouts set, redirects off,
no proxy settings read from the environment, so that one place decides where
a provider may connect. SDK retries are off everywhere: the loop retries and
records each attempt.

Every failure an SDK or the transport raises becomes a
:class:`~io_harness.errors.ProviderError` in :func:`provider_error`, with any
API key scrubbed from its message before it can reach the store or a cassette.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Iterable, Mapping

import anthropic
import httpx2
import openai

from io_harness.errors import ProviderError, ProviderErrorKind

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "body_message",
    "harness_client",
    "is_context_overflow",
    "provider_error",
    "redact",
    "retry_after_seconds",
    "status_error",
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


def harness_client(timeout: float = DEFAULT_TIMEOUT_SECONDS) -> httpx2.AsyncClient:
    """The HTTP client a provider's SDK uses: bounded waits, no redirects, no env proxies."""
    return httpx2.AsyncClient(
        timeout=httpx2.Timeout(timeout, connect=min(timeout, _CONNECT_SECONDS)),
        follow_redirects=False,
        trust_env=False,
    )


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

    429 is ``rate_limited`` (with ``Retry-After``), 401/403 ``auth``, 408
    ``timeout``, 5xx and Anthropic's 529 ``server``; any status whose message
    says the prompt is too long is ``context_overflow``; other 4xx are
    ``bad_request``.
    """
    message = _clip(redact(message, secrets))
    kind: ProviderErrorKind
    if is_context_overflow(message) and status in (400, 413, 422, 500):
        kind = "context_overflow"
    elif status == 429:
        kind = "rate_limited"
    elif status in (401, 403):
        kind = "auth"
    elif status == 408:
        kind = "timeout"
    elif status >= 500:
        kind = "server"
    else:
        kind = "bad_request"
    retry_after = retry_after_seconds(headers) if headers is not None else None
    return ProviderError(kind, message, status=status, retry_after=retry_after)


def provider_error(exc: BaseException, *, secrets: Iterable[str | None] = ()) -> ProviderError:
    """What an exception raised by an SDK or the transport means, as a typed error."""
    if isinstance(exc, ProviderError):
        return exc
    secrets = tuple(secrets)
    if isinstance(exc, openai.APIStatusError | anthropic.APIStatusError):
        message = body_message(exc.body if exc.body is not None else str(exc), secrets)
        return status_error(exc.status_code, message, dict(exc.response.headers), secrets=secrets)
    timeouts = openai.APITimeoutError | anthropic.APITimeoutError | httpx2.TimeoutException
    if isinstance(exc, timeouts):
        return ProviderError("timeout", redact(f"the request timed out: {exc}", secrets))
    broken = httpx2.RemoteProtocolError | httpx2.DecodingError | httpx2.SSEError
    if isinstance(exc.__cause__, broken) and isinstance(
        exc, openai.APIConnectionError | anthropic.APIConnectionError
    ):
        exc = exc.__cause__  # an SDK wraps a stream that broke off as a connection error
    if isinstance(exc, broken):
        return ProviderError(
            "bad_response", redact(f"the response stream broke off or is malformed: {exc}", secrets)
        )
    if isinstance(
        exc, openai.APIConnectionError | anthropic.APIConnectionError | httpx2.TransportError
    ):
        cause = exc.__cause__ or exc
        message = f"could not reach the server: {type(cause).__name__}: {cause}"
        return ProviderError("network", redact(message, secrets))
    if isinstance(exc, openai.APIError | anthropic.APIError):
        # An error the server sent inside an otherwise good stream.
        message = body_message(exc.body if exc.body is not None else str(exc), secrets)
        kind: ProviderErrorKind = "context_overflow" if is_context_overflow(message) else "server"
        return ProviderError(kind, redact(message, secrets))
    if isinstance(exc, ValueError):  # JSON that does not parse, a field of the wrong shape
        return ProviderError(
            "bad_response", redact(f"the server's answer is malformed: {exc}", secrets)
        )
    return ProviderError(
        "bad_response", redact(f"the SDK failed: {type(exc).__name__}: {exc}", secrets)
    )
