"""The provider seam: one async call from a canonical request to a canonical answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from io_harness.messages import CompletionRequest, CompletionResponse, StreamDelta

__all__ = ["Provider", "StreamingProvider"]


@runtime_checkable
class Provider(Protocol):
    """A model the loop can call.

    ``name`` identifies the provider in the trace, ``model`` is the model it
    will ask for, and :meth:`endpoints` lists the hosts it dials (empty for an
    offline provider). :meth:`complete` raises
    :class:`~io_harness.errors.ProviderError` when it cannot answer.
    """

    name: str
    model: str

    def endpoints(self) -> tuple[str, ...]:
        """The hosts (``host`` or ``host:port``) this provider connects to.

        A run's ``provider`` layer allows these to the provider's own
        connections (``docs/network.md``); a request elsewhere is decided by
        the run's policy alone.
        """
        ...

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """Answer one request."""
        ...


@runtime_checkable
class StreamingProvider(Provider, Protocol):
    """A provider that can also hand over its answer piece by piece.

    :meth:`stream` yields :class:`~io_harness.messages.StreamDelta` pieces as
    they arrive and then, as its last item, the whole
    :class:`~io_harness.messages.CompletionResponse`. A stream that ends
    without one, or breaks, raises :class:`~io_harness.errors.ProviderError`.
    The loop prefers :meth:`stream` when a provider has it: deltas reach
    observers and the time to the first token is recorded.
    """

    def stream(self, request: CompletionRequest) -> AsyncIterator[StreamDelta | CompletionResponse]:
        """Deltas as they arrive, then the complete answer."""
        ...
