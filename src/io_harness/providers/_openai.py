"""The Chat Completions family: OpenAI, OpenRouter and any OpenAI-compatible server.

One class does the work; the vendors differ only in class attributes (which
environment variables to read, the default base URL, whether the token cap
is sent as ``max_completion_tokens`` or ``max_tokens``, extra headers). Every
call streams, with ``stream_options.include_usage`` so the final chunk
carries the token counts; the wire mapping lives in
:mod:`io_harness.providers._openai_wire`.

The SDK is imported by the first call, not with this module: it takes about a
second to load, and ``import io_harness`` must not pay for it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from io_harness._urls import without_password
from io_harness.errors import ConfigError, ProviderError
from io_harness.messages import CompletionRequest, CompletionResponse, StreamDelta
from io_harness.providers._http import (
    DEFAULT_TIMEOUT_SECONDS,
    PerLoopClient,
    harness_client,
    provider_error,
)
from io_harness.providers._openai_wire import ChunkAssembler, wire_messages, wire_tools
from io_harness.providers._presets import PRESETS
from io_harness.providers._vendor import final_answer, vendor_settings

if TYPE_CHECKING:
    import httpx2
    import openai

__all__ = ["OpenAI", "OpenAICompatible", "OpenRouter"]

PLACEHOLDER_API_KEY = "not-needed"
"""The key sent to a compatible server that wants none (the SDK insists on one)."""


class OpenAI:
    """OpenAI's Chat Completions API, streamed.

    What is not given comes from the environment: ``OPENAI_API_KEY``,
    ``OPENAI_MODEL`` and ``OPENAI_BASE_URL`` (default
    ``https://api.openai.com/v1``). A missing key or model is a
    :class:`~io_harness.errors.ConfigError` naming the variable. Failures
    are :class:`~io_harness.errors.ProviderError`; the SDK never retries,
    the loop does. Subclasses change only the class attributes below.
    """

    name: str = "openai"
    api_key_env: ClassVar[str] = "OPENAI_API_KEY"
    """Where the key is read from when ``api_key`` is not given."""
    model_env: ClassVar[str] = "OPENAI_MODEL"
    """Where the model is read from when ``model`` is not given."""
    base_url_env: ClassVar[str] = "OPENAI_BASE_URL"
    """Where the base URL is read from when ``base_url`` is not given."""
    default_base_url: ClassVar[str | None] = "https://api.openai.com/v1"
    """The base URL when neither argument nor environment gives one (None: required)."""
    api_key_required: ClassVar[bool] = True
    """Whether a missing key is an error (else :data:`PLACEHOLDER_API_KEY` is sent)."""
    max_tokens_param: ClassVar[Literal["max_completion_tokens", "max_tokens"]] = (
        "max_completion_tokens"
    )
    """The request field that carries the token cap."""
    extra_headers: ClassVar[Mapping[str, str]] = MappingProxyType({})
    """Headers sent with every request, besides the SDK's own."""

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        settings = vendor_settings(
            model=model,
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            key_env=self.api_key_env,
            model_env=self.model_env,
            url_env=self.base_url_env,
            default_url=self.default_base_url,
            key_required=self.api_key_required,
        )
        key = settings.api_key
        self.model: str = settings.model
        self.base_url: str = settings.base_url
        self.timeout = settings.timeout
        self.headers: dict[str, str] = dict(self.extra_headers)
        self._endpoint = settings.endpoint
        self._api_key = key or PLACEHOLDER_API_KEY
        self._secrets: tuple[str, ...] = (key,) if key else ()
        self._clients: PerLoopClient[openai.AsyncOpenAI] = PerLoopClient()

    @classmethod
    def from_env(cls, **kwargs: Any) -> Self:
        """The provider configured from the environment; ``kwargs`` override it."""
        return cls(**kwargs)

    def __repr__(self) -> str:
        kind = type(self).__name__
        shown = without_password(self.base_url)
        return f"{kind}(name={self.name!r}, model={self.model!r}, base_url={shown!r})"

    def endpoints(self) -> tuple[str, ...]:
        """The one host this provider dials, as ``host:port``."""
        return (self._endpoint,)

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """Answer one request: :meth:`stream` consumed to its final response."""
        return await final_answer(self.stream(request))

    async def stream(
        self, request: CompletionRequest
    ) -> AsyncGenerator[StreamDelta | CompletionResponse, None]:
        """Deltas as the chunks arrive, then the whole answer.

        Text deltas joined equal the answer's text. Raises
        :class:`~io_harness.errors.ProviderError` for any failure, including
        a stream that breaks off or ends before the model finished.
        """
        import openai

        assembler = ChunkAssembler(request)
        try:
            client = await self._clients.get(self._new_client)
            chunks = await client.chat.completions.create(
                model=request.model,
                messages=wire_messages(request),
                stream=True,
                stream_options={"include_usage": True},
                tools=wire_tools(request.tools) if request.tools else openai.omit,
                temperature=request.temperature if request.temperature is not None else openai.omit,
                max_completion_tokens=(
                    request.max_tokens
                    if self.max_tokens_param == "max_completion_tokens"
                    else openai.omit
                ),
                max_tokens=(
                    request.max_tokens if self.max_tokens_param == "max_tokens" else openai.omit
                ),
            )
            async with chunks:
                async for chunk in chunks:
                    for delta in assembler.feed(chunk):
                        yield delta
        except Exception as exc:
            error = self._failure(exc)
            if self._leaks_secret(exc):
                raise error from None  # a traceback would print the key
            raise error from exc
        yield assembler.finish()

    async def aclose(self) -> None:
        """Close the HTTP client; the next call makes a new one."""
        await self._clients.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _new_client(self) -> tuple[openai.AsyncOpenAI, httpx2.AsyncClient]:
        """A new SDK client and the HTTP client under it (one pair per event loop)."""
        import openai

        http = harness_client(self.timeout)
        client = openai.AsyncOpenAI(
            api_key=self._api_key,
            base_url=self.base_url,
            http_client=http,
            max_retries=0,
            default_headers=self.headers or None,
        )
        return client, http

    def _leaks_secret(self, exc: BaseException) -> bool:
        """Whether ``exc`` or what it wraps says the API key out loud."""
        texts: list[str] = []
        seen: BaseException | None = exc
        while seen is not None and len(texts) < 20:
            texts.extend((str(seen), repr(seen), repr(getattr(seen, "body", None))))
            seen = seen.__cause__ or seen.__context__
        return any(secret in text for secret in self._secrets for text in texts)

    def _failure(self, exc: BaseException) -> ProviderError:
        """``exc`` as a typed error, with the key scrubbed from its message."""
        return provider_error(exc, secrets=self._secrets)


class OpenRouter(OpenAI):
    """OpenRouter's Chat Completions API, with its attribution headers.

    Reads ``OPENROUTER_API_KEY``, ``OPENROUTER_MODEL`` and
    ``OPENROUTER_BASE_URL`` (default ``https://openrouter.ai/api/v1``);
    ``app_url`` and ``app_name`` are sent as ``HTTP-Referer`` and ``X-Title``.
    """

    name = "openrouter"
    api_key_env = "OPENROUTER_API_KEY"
    model_env = "OPENROUTER_MODEL"
    base_url_env = "OPENROUTER_BASE_URL"
    default_base_url = "https://openrouter.ai/api/v1"
    max_tokens_param = "max_tokens"

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        app_url: str = "https://github.com/io-harness/io-harness",
        app_name: str = "io-harness",
    ) -> None:
        super().__init__(model, api_key=api_key, base_url=base_url, timeout=timeout)
        self.headers.update({"HTTP-Referer": app_url, "X-Title": app_name})


class OpenAICompatible(OpenAI):
    """Any server that speaks Chat Completions: Ollama, vLLM, llama.cpp, LM Studio...

    The base URL is required (``base_url=`` or ``OPENAI_COMPATIBLE_BASE_URL``);
    the key is optional (``OPENAI_COMPATIBLE_API_KEY``, else a placeholder);
    the model comes from ``model=`` or ``OPENAI_COMPATIBLE_MODEL``. ``name``
    labels the provider in traces; :meth:`preset` fills it and the URL for a
    known local server.
    """

    name = "compatible"
    api_key_env = "OPENAI_COMPATIBLE_API_KEY"
    model_env = "OPENAI_COMPATIBLE_MODEL"
    base_url_env = "OPENAI_COMPATIBLE_BASE_URL"
    default_base_url = None
    api_key_required = False
    max_tokens_param = "max_tokens"

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        name: str | None = None,
    ) -> None:
        super().__init__(model, api_key=api_key, base_url=base_url, timeout=timeout)
        if name is not None:
            self.name = name

    @classmethod
    def preset(
        cls,
        name: str,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> Self:
        """A provider for a known local server (see :data:`PRESETS`), named after it."""
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}")
        return cls(
            model,
            api_key=api_key,
            base_url=base_url or PRESETS[name],
            timeout=timeout,
            name=name,
        )
