"""Anthropic's Messages API as a streaming :class:`~io_harness.providers.Provider`.

Requests go out through the ``anthropic`` SDK over the harness's own HTTP
client (:func:`~io_harness.providers._http.harness_client`), with SDK retries
off; the answer is read from the raw event stream and mapped to the canonical
types in :mod:`io_harness.providers._anthropic_wire`. Every failure becomes a
:class:`~io_harness.errors.ProviderError` with the API key scrubbed out.

The SDK is imported by the first call, not with this module: it takes about a
second to load, and ``import io_harness`` must not pay for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable
from typing import TYPE_CHECKING, Any, ClassVar, cast

from io_harness._urls import without_password
from io_harness.errors import ConfigError, ProviderError
from io_harness.messages import CompletionRequest, CompletionResponse, StreamDelta
from io_harness.providers._anthropic_wire import (
    StreamAssembler,
    request_params,
    stream_error,
)
from io_harness.providers._http import (
    DEFAULT_TIMEOUT_SECONDS,
    PerLoopClient,
    harness_client,
    provider_error,
)
from io_harness.providers._vendor import final_answer, vendor_settings

if TYPE_CHECKING:
    import anthropic
    import httpx2
    from anthropic import AsyncAPIResponse, AsyncStream

__all__ = ["DEFAULT_BASE_URL", "MIN_THINKING_BUDGET", "Anthropic"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
"""Where the Messages API lives unless ``base_url`` or ``ANTHROPIC_BASE_URL`` says otherwise."""

MIN_THINKING_BUDGET = 1024
"""The smallest extended-thinking budget the API accepts, in tokens."""

_EXTRA_BODY_KEYS = ("temperature",)  # body fields `messages.create` has no argument for
_DRAIN_SECONDS = 1.0


class Anthropic:
    """Claude through Anthropic's Messages API, streamed.

    Arguments not given come from the environment: ``ANTHROPIC_API_KEY``,
    ``ANTHROPIC_MODEL`` and ``ANTHROPIC_BASE_URL`` (default
    ``https://api.anthropic.com``); a missing key or model is a
    :class:`~io_harness.errors.ConfigError`. ``timeout`` bounds the connect
    and each wait for the next piece of the answer. ``thinking_budget`` turns
    on extended thinking with that many tokens (at least 1024) on top of the
    request's ``max_tokens``. ``cache_system`` marks the system prompt for
    prompt caching.

    One HTTP client is kept per event loop, made on first use and closed
    when that loop shuts down, so the same provider works across several
    ``asyncio.run`` calls; :meth:`aclose` closes it sooner.
    """

    name: str = "anthropic"
    base_url_env: ClassVar[str] = "ANTHROPIC_BASE_URL"
    """Where the base URL is read from when ``base_url`` is not given."""

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        thinking_budget: int | None = None,
        cache_system: bool = True,
    ) -> None:
        settings = vendor_settings(
            model=model,
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            key_env="ANTHROPIC_API_KEY",
            model_env="ANTHROPIC_MODEL",
            url_env=self.base_url_env,
            default_url=DEFAULT_BASE_URL,
        )
        if thinking_budget is not None and (
            isinstance(thinking_budget, bool)
            or not isinstance(thinking_budget, int)
            or thinking_budget < MIN_THINKING_BUDGET
        ):
            raise ConfigError(
                f"thinking_budget must be an int of at least {MIN_THINKING_BUDGET} tokens, "
                f"not {thinking_budget!r}"
            )
        self.model: str = settings.model
        self.base_url: str = settings.base_url
        self.timeout: float = settings.timeout
        self.thinking_budget: int | None = thinking_budget
        self.cache_system: bool = cache_system
        self._api_key: str = settings.api_key or ""
        self._endpoint = settings.endpoint
        self._clients: PerLoopClient[anthropic.AsyncAnthropic] = PerLoopClient()

    @classmethod
    def from_env(cls, **kwargs: Any) -> Anthropic:
        """A provider configured by the environment, with ``kwargs`` taking precedence."""
        return cls(**kwargs)

    def __repr__(self) -> str:
        return f"Anthropic(model={self.model!r}, base_url={without_password(self.base_url)!r})"

    def endpoints(self) -> tuple[str, ...]:
        """The one host this provider dials, as ``host:port``."""
        return (self._endpoint,)

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """Answer one request: :meth:`stream` consumed to its final response."""
        return await final_answer(self.stream(request))

    async def stream(
        self, request: CompletionRequest
    ) -> AsyncGenerator[StreamDelta | CompletionResponse, None]:
        """Deltas as the answer streams in, then the whole :class:`CompletionResponse`.

        Raises :class:`~io_harness.errors.ProviderError` for an HTTP error, an
        ``error`` event in the stream, a stream that breaks off or never
        finishes, or a body that is not a Messages event stream.
        """
        from anthropic import AsyncStream

        secrets = (self._api_key,)
        assembler = StreamAssembler(model=self.model, secrets=secrets)
        raw: AsyncAPIResponse[Any] | None = None
        try:
            params = request_params(
                request,
                model=self.model,
                cache_system=self.cache_system,
                thinking_budget=self.thinking_budget,
            )
            # The SDK's `create` no longer takes `temperature`; the API still does.
            extra = {key: params.pop(key) for key in _EXTRA_BODY_KEYS if key in params}
            client = await self._clients.get(self._new_client)
            raw = await client.messages.with_raw_response.create(
                **params, stream=True, extra_body=extra or None
            )
            events = await raw.parse(to=AsyncStream[object])
        except Exception as exc:
            if raw is not None:
                await _quietly(raw.close())
            raise self._error(exc) from None
        try:
            while not assembler.finished:
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    break
                for delta in assembler.feed(event):
                    yield delta
            response = assembler.response()
            await _drain(events)
        except Exception as exc:
            raise self._error(exc) from None
        finally:
            await _quietly(events.close())
        yield response

    async def aclose(self) -> None:
        """Close the HTTP client; the next call makes a new one."""
        await self._clients.aclose()

    def _new_client(self) -> tuple[anthropic.AsyncAnthropic, httpx2.AsyncClient]:
        """A new SDK client and the HTTP client under it (one pair per event loop)."""
        import anthropic

        http = harness_client(self.timeout)
        sdk = anthropic.AsyncAnthropic(
            api_key=self._api_key,
            base_url=self.base_url,
            http_client=http,
            timeout=http.timeout,
            max_retries=0,
            # The Messages API takes a key in x-api-key; the SDK would send it as a
            # bearer token.
            default_headers=cast(
                "dict[str, str]", {"x-api-key": self._api_key, "Authorization": anthropic.omit}
            ),
        )
        return sdk, http

    def _error(self, exc: Exception) -> ProviderError:
        # An `error` event mid-stream reaches us as a status error carrying the 200 of
        # the stream's response: type it by the error's own type, not by that status.
        import anthropic  # loaded by `stream` already

        secrets = (self._api_key,)
        if isinstance(exc, anthropic.APIStatusError) and 200 <= exc.status_code < 300:
            return stream_error(exc.body, secrets)
        return provider_error(exc, secrets=secrets)


async def _quietly(closing: Awaitable[None]) -> None:
    """Await a close; a connection that is already gone has nothing left to release."""
    try:
        await closing
    except Exception:
        return


async def _drain(events: AsyncStream[object]) -> None:
    """Read what follows ``message_stop`` (the end of the body), so the connection is reused.

    Bounded: a server that holds the stream open after the answer is not waited for.
    """
    try:
        async with asyncio.timeout(_DRAIN_SECONDS):
            async for _ in events:
                pass
    except Exception:  # the answer is complete; a late failure is not its concern
        return
