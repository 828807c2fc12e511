"""OS sandboxes for every command the harness runs: one protocol, several backends.

``select(SandboxConfig(...))`` walks this platform's chain of backends and
returns the first that gives the containment asked for, or raises
:class:`~io_harness.errors.SandboxError` saying why none does.
"""

from io_harness.errors import SandboxError
from io_harness.sandbox._direct import DIRECT, run_direct
from io_harness.sandbox._linux import (
    BubblewrapSandbox,
    FloorSandbox,
    LandlockSandbox,
    NamespacesSandbox,
)
from io_harness.sandbox._select import BackendReport, probe, select
from io_harness.sandbox._types import (
    Cap,
    NetCheck,
    Network,
    Sandbox,
    SandboxConfig,
    SandboxEvent,
    SandboxLimits,
    SandboxMode,
    SandboxOutcome,
)

__all__ = [
    "DIRECT",
    "BackendReport",
    "BubblewrapSandbox",
    "Cap",
    "FloorSandbox",
    "LandlockSandbox",
    "NamespacesSandbox",
    "NetCheck",
    "Network",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "SandboxEvent",
    "SandboxLimits",
    "SandboxMode",
    "SandboxOutcome",
    "probe",
    "run_direct",
    "select",
]
