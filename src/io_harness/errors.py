"""One exception tree for everything the harness raises.

Exceptions are for configuration mistakes and broken infrastructure, found
before the first provider call or when a store cannot be trusted. What goes
wrong *during* a run (a refused path, a failing tool, a failing criterion)
is an observation the model reads, never an exception.
"""

from __future__ import annotations

import shlex
from typing import Literal

__all__ = [
    "ConfigError",
    "HarnessError",
    "McpError",
    "ProviderError",
    "ProviderErrorKind",
    "RefusedError",
    "ResumeError",
    "SandboxError",
    "StorageError",
]

ProviderErrorKind = Literal[
    "rate_limited",
    "server",
    "timeout",
    "network",
    "auth",
    "bad_response",
    "bad_request",
    "context_overflow",
    "refused",
]

TRANSIENT_KINDS: frozenset[ProviderErrorKind] = frozenset(
    {"rate_limited", "server", "timeout", "network", "bad_response"}
)


class HarnessError(Exception):
    """The root of every error io-harness raises.

    ``shell``, when given, is the message as a person at the ``ioh`` command
    line needs it: the variable to set, the ``ioh`` command to run with the
    run's id, instead of a Python argument; ``{store}`` in it marks where the
    command's ``--store`` goes. The message itself is worded for Python callers.
    """

    def __init__(self, *args: object, shell: str | None = None) -> None:
        super().__init__(*args)
        self.shell = shell


class ConfigError(HarnessError):
    """A contract, tool set, file or option is wrong; raised before any provider call."""


class RefusedError(HarnessError):
    """The policy refuses something the run cannot proceed without."""


class SandboxError(HarnessError):
    """No sandbox can give the containment the run asked for."""


class McpError(HarnessError):
    """An MCP server could not be started, reached or understood."""


class ResumeError(HarnessError):
    """A run cannot be resumed: an unknown id, a store written by a newer version, a stored
    conversation its steps disagree with, or a harness without what the run started with
    (a caller tool, an MCP server, its provider's endpoint)."""


class StorageError(HarnessError):
    """The store is unreadable, corrupt or cannot commit."""


class ProviderError(HarnessError):
    """A model provider failed to answer.

    ``kind`` says what failed and decides whether the harness retries:
    ``rate_limited``, ``server``, ``timeout``, ``network`` and ``bad_response``
    (a body or stream that is malformed or cut off) are transient and retried;
    ``auth``, ``bad_request``, ``context_overflow`` and ``refused`` (the
    policy refused the connection: see ``docs/network.md``) are not.
    ``retry_after`` is the wait in seconds the provider asked for, if any.
    """

    def __init__(
        self,
        kind: ProviderErrorKind,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: ProviderErrorKind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        """Whether another attempt may succeed."""
        return self.kind in TRANSIENT_KINDS

    def to_dict(self) -> dict[str, object]:
        """The error as plain JSON data: what the store and cassettes keep."""
        return {
            "kind": self.kind,
            "message": self.message,
            "status": self.status,
            "retry_after": self.retry_after,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> ProviderError:
        """The error :meth:`to_dict` wrote."""
        status, retry_after = data.get("status"), data.get("retry_after")
        return cls(
            data["kind"],  # type: ignore[arg-type]
            str(data["message"]),
            status=int(status) if isinstance(status, int | float) else None,
            retry_after=float(retry_after) if isinstance(retry_after, int | float) else None,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProviderError):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash((self.kind, self.message, self.status, self.retry_after))

    def __str__(self) -> str:
        status = f" (HTTP {self.status})" if self.status is not None else ""
        return f"{self.kind}{status}: {self.message}"

    def __repr__(self) -> str:
        return (
            f"ProviderError(kind={self.kind!r}, message={self.message!r}, "
            f"status={self.status!r}, retry_after={self.retry_after!r})"
        )


def run_already_stored(run_id: str) -> ConfigError:
    """The error for a new run whose id the store holds already."""
    said = f"a run with id {run_id!r} is already in the store"
    return ConfigError(
        f"{said}; use resume() to continue it",
        shell=f"{said}; ioh resume {shlex.quote(run_id)}{{store}} continues it, "
        "or give another --run-id",
    )
