"""The orchestration loop: one step at a time, always from stored state.

Every way a run starts is prepared (``io_harness.prepare``) into a
:class:`~io_harness.prepare.PreparedRun` and handed to
:class:`~io_harness.loop._engine.Engine`, which always starts from what the
store holds, so running and resuming are one path.
"""

from io_harness.loop._engine import Engine
from io_harness.loop._outcome import RunOutcome, RunResult
from io_harness.loop._sandboxing import (
    DEFAULT_SANDBOX,
    NO_SANDBOX,
    RunSandbox,
    SandboxChoice,
    choose_sandbox,
)

__all__ = [
    "DEFAULT_SANDBOX",
    "NO_SANDBOX",
    "Engine",
    "RunOutcome",
    "RunResult",
    "RunSandbox",
    "SandboxChoice",
    "choose_sandbox",
]
