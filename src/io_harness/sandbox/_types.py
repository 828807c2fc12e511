"""What every sandbox shares: its limits, its configuration, its outcome and its protocol."""

from __future__ import annotations

import signal as _signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import ConfigDict, Field, field_validator

from io_harness._validation import CheckedModel

__all__ = [
    "BACKENDS",
    "Cap",
    "NetCheck",
    "Network",
    "Sandbox",
    "SandboxConfig",
    "SandboxEvent",
    "SandboxLimits",
    "SandboxMode",
    "SandboxOutcome",
    "ended_events",
]

SandboxMode = Literal["read_only", "workspace_write", "full_access"]
"""What a command may write.

``read_only``: only its private scratch folder; ``workspace_write`` (the
default): the workdir and the scratch folder; ``full_access``: whatever the
user running the harness may write (still in the sandbox's namespaces).
"""

Network = Literal["deny", "allow_list", "open"]
"""``deny`` (the default): no connection leaves the sandbox. ``allow_list``: only
connections made through the harness's proxy, each checked by host and port.
``open``: the host's network, unchanged."""

Cap = Literal["cpu", "wall", "memory", "processes", "output", "file_size", "disk"]
"""The cap that killed a command, or (``disk`` alone) that it was found past when it ended."""

NetCheck = Callable[[str, int], Awaitable[bool]]
"""Asked for each connection through the proxy: may the command reach ``host:port``?"""


class SandboxLimits(CheckedModel):
    """The caps a sandboxed command runs under. Each cap kills; none throttles.

    The defaults suit a test suite or a build on a small machine.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    cpu_seconds: float = Field(60.0, gt=0)
    """CPU time (user + system) of the command's processes; past it, SIGXCPU then SIGKILL."""
    wall_seconds: float = Field(300.0, gt=0)
    """Time from start to the end of the whole process tree."""
    memory_bytes: int = Field(2 << 30, gt=0)
    """Memory of the whole tree (a cgroup) where cgroups are writable; else address space."""
    processes: int = Field(256, gt=0)
    """Processes and threads alive at once in the tree."""
    output_bytes: int = Field(8 << 20, gt=0)
    """Bytes of stdout and stderr together; past it the tree is killed."""
    file_size_bytes: int = Field(1 << 30, gt=0)
    """The largest file a process may write (``RLIMIT_FSIZE``)."""
    disk_bytes: int | None = Field(1 << 30, gt=0)
    """What the command's writes may add in all, over every file of the folders it may
    write (and bubblewrap's ``/tmp``), counted by allocated blocks; ``None`` (``false``
    in TOML): no total cap."""
    open_files: int = Field(1024, gt=0)
    """Open file descriptors per process (``RLIMIT_NOFILE``)."""

    @field_validator("disk_bytes", mode="before")
    @classmethod
    def _false_is_none(cls, value: Any) -> Any:
        # TOML has no null: ``disk_bytes = false`` says there is no total cap.
        if value is True:
            raise ValueError("give a number of bytes, or false for no total cap")
        return None if value is False else value

    def record(self) -> dict[str, Any]:
        """The limits as plain JSON values, for the trace."""
        return self.model_dump()


BACKENDS = ("bubblewrap", "landlock", "namespaces", "seatbelt", "job_object", "floor")
"""Every backend's name, in the order :func:`~io_harness.sandbox.select` prefers them."""


class SandboxConfig(CheckedModel):
    """What :func:`io_harness.sandbox.select` must find a backend for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    limits: SandboxLimits = Field(default_factory=SandboxLimits)
    mode: SandboxMode = "workspace_write"
    network: Network = "deny"
    allow_hosts: tuple[str, ...] = ()
    """With ``network="allow_list"``: ``host`` or ``host:port`` globs the proxy lets through
    (``*.example.com`` matches subdomains). A per-connection check can narrow it further."""
    allow_unix_sockets: tuple[str, ...] = ()
    """Paths of the host's Unix sockets a command may connect to (a database's, say); with
    a closed network every other listening socket outside the command's folders is hidden
    (bubblewrap)."""
    backends: tuple[str, ...] | None = None
    """The backends to consider, in order (names from :data:`BACKENDS`); ``None``: this
    platform's chain."""
    accept_floor: bool = False
    """Accept the portable floor even though it cannot deny the network."""

    @field_validator("backends")
    @classmethod
    def _known(cls, names: tuple[str, ...] | None) -> tuple[str, ...] | None:
        unknown = [name for name in names or () if name not in BACKENDS]
        if unknown:
            raise ValueError(f"unknown backends {unknown}; known: {list(BACKENDS)}")
        return names


@dataclass(frozen=True, slots=True)
class SandboxEvent:
    """One row of a run's ``sandbox_events``.

    ``create`` (backend, mode, limits), ``exec`` (argv, duration), ``cap_hit``
    (which cap), ``net`` (a proxied connection and the decision on it), ``undone``
    (what the command did to files that run code later, undone), ``destroy``.
    """

    kind: Literal["create", "exec", "cap_hit", "net", "undone", "destroy"]
    backend: str
    detail: Mapping[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)
    """When it happened (Unix time)."""


def ended_events(
    backend: str,
    argv: Sequence[str],
    duration: float,
    cap: Cap | None,
    cap_detail: Mapping[str, Any] | None = None,
) -> list[SandboxEvent]:
    """The events that close a command's trace: ``exec``, ``cap_hit`` if one (with
    ``cap_detail``), ``destroy``."""
    events = [SandboxEvent("exec", backend, {"argv": list(argv), "duration": duration})]
    if cap is not None:
        events.append(SandboxEvent("cap_hit", backend, {"cap": cap, **(cap_detail or {})}))
    return [*events, SandboxEvent("destroy", backend, {})]


@dataclass(frozen=True, slots=True)
class SandboxOutcome:
    """What one sandboxed command did."""

    backend: str
    argv: tuple[str, ...]
    exit_code: int | None
    """The exit status, or ``None`` when a signal ended the command or it did not start."""
    signal: int | None
    cap_hit: Cap | None
    """The cap that killed the command, if one did; ``disk`` also when the command was
    found past the disk cap only after it ended (it then has an ``exit_code``)."""
    stdout: str
    stderr: str
    truncated: bool
    """Output was cut (the head and tail are kept; the text says where)."""
    duration: float
    spawn_error: str | None = None
    """Why the command could not start (not found, not executable), if it could not."""
    events: tuple[SandboxEvent, ...] = ()
    """What the sandbox did, in order, for the trace."""
    written_bytes: int | None = None
    """With ``cap_hit="disk"``: what the command's writes had added when the disk cap's
    meter found it past the cap (at least that much); otherwise ``None``."""
    undone: tuple[str, ...] = ()
    """What the command did to files that run code later (a new ``.bashrc``, a changed
    hook), each undone after it ended: one line each."""

    @property
    def timed_out(self) -> bool:
        """Killed at the wall-clock cap."""
        return self.cap_hit == "wall"

    @property
    def summary(self) -> str:
        """One line: how the command ended."""
        if self.spawn_error is not None:
            return f"could not start: {self.spawn_error}"
        if self.cap_hit == "disk" and self.exit_code is not None:
            # Only the disk cap is also found after a command has ended on its own.
            return f"over the disk cap when it ended (exit status {self.exit_code})"
        if self.cap_hit is not None:
            return f"killed at the {self.cap_hit.replace('_', '-')} cap"
        if self.signal is not None:
            try:
                name = _signal.Signals(self.signal).name
            except ValueError:
                name = str(self.signal)
            return f"killed by signal {name}"
        return f"exit status {self.exit_code}"


@runtime_checkable
class Sandbox(Protocol):
    """Runs one command at a time under containment; the seam every backend fills.

    ``run`` never raises for what the command does: a command that cannot start,
    fails or hits a cap is an outcome. After ``run`` returns, or is cancelled, no
    process it started is alive and its scratch folder is gone.
    """

    @property
    def name(self) -> str:
        """The backend's name, as the trace records it."""
        ...

    @property
    def config(self) -> SandboxConfig:
        """The configuration this sandbox enforces."""
        ...

    async def run(
        self,
        argv: Sequence[str],
        *,
        workdir: Path,
        env: Mapping[str, str] | None = None,
        limits: SandboxLimits | None = None,
        mode: SandboxMode | None = None,
        readable: Sequence[Path] = (),
        writable: Sequence[Path] = (),
        stdin: bytes | None = None,
        net_check: NetCheck | None = None,
    ) -> SandboxOutcome:
        """Run ``argv`` (no shell) in ``workdir`` and wait for the whole tree to end.

        ``limits`` and ``mode`` override the configuration for this command.
        ``readable`` and ``writable`` are extra folders the command may read, or
        read and write, at the same paths (the harness's runner and its record).
        ``stdin`` is written to the command's standard input, which is then closed;
        without it the command reads an empty input.
        ``net_check`` is asked for each proxied connection (``allow_list`` only).
        """
        ...
