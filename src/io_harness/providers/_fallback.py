"""Fallback: providers in order; the next answers when one cannot."""

from __future__ import annotations

from collections.abc import AsyncIterator

from io_harness.errors import ConfigError, ProviderError
from io_harness.messages import CompletionRequest, CompletionResponse, StreamDelta
from io_harness.providers._base import Provider, StreamingProvider

__all__ = ["Fallback", "members_of"]


class Fallback:
    """Ask ``providers`` in order: when one fails, after the loop's retries, the next answers.

    An ``auth`` failure does not fall back: a wrong or missing key is the
    operator's to fix, not something another vendor should hide. Each attempt
    is recorded under the member that made it, so the trace says which
    provider answered. Each member is asked for its own ``model``.
    """

    def __init__(self, *providers: Provider) -> None:
        if not providers:
            raise ConfigError("Fallback needs at least one provider")
        for provider in providers:
            if not isinstance(provider, Provider):
                raise ConfigError(f"Fallback: {type(provider).__name__} is not a Provider")
        self.members: tuple[Provider, ...] = providers
        self.name = "fallback"
        self.model = providers[0].model

    def __repr__(self) -> str:
        inner = ", ".join(f"{m.name}:{m.model}" for m in self.members)
        return f"Fallback({inner})"

    def endpoints(self) -> tuple[str, ...]:
        """Every member's endpoints, without repeats."""
        return tuple(dict.fromkeys(e for m in self.members for e in m.endpoints()))

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """One attempt per member in order (the loop drives retries when it runs a Fallback)."""
        error: ProviderError | None = None
        for member in self.members:
            try:
                return await member.complete(request.model_copy(update={"model": member.model}))
            except ProviderError as exc:
                if exc.kind == "auth":
                    raise
                error = exc
        assert error is not None
        raise error

    async def stream(
        self, request: CompletionRequest
    ) -> AsyncIterator[StreamDelta | CompletionResponse]:
        """As :meth:`complete`, streaming from members that stream."""
        error: ProviderError | None = None
        for member in self.members:
            asked = request.model_copy(update={"model": member.model})
            try:
                if isinstance(member, StreamingProvider):
                    async for item in member.stream(asked):
                        yield item
                else:
                    yield await member.complete(asked)
                return
            except ProviderError as exc:
                if exc.kind == "auth":
                    raise
                error = exc
        assert error is not None
        raise error


def members_of(provider: Provider) -> tuple[Provider, ...]:
    """The providers the loop asks in turn: a Fallback's members, or the provider itself."""
    return provider.members if isinstance(provider, Fallback) else (provider,)
