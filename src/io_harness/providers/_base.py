"""The provider seam: one async call from a canonical request to a canonical answer."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from io_harness.messages import CompletionRequest, CompletionResponse

__all__ = ["Provider"]


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
        """The hosts (``host`` or ``host:port``) this provider connects to."""
        ...

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """Answer one request."""
        ...
