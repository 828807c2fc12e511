"""The orchestration loop: one step at a time, always from stored state.

:class:`~io_harness.Harness` (``_harness.py``) prepares a run or a resume
and hands it to :class:`~io_harness.loop._engine.Engine`, which always starts
from what the store holds, so running and resuming are one path.
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
from io_harness.loop._setup import (
    RunSetup,
    build_tools,
    mcp_sessions,
    memory_scope,
    run_skills,
    server_sandbox,
)

__all__ = [
    "DEFAULT_SANDBOX",
    "NO_SANDBOX",
    "Engine",
    "RunOutcome",
    "RunResult",
    "RunSandbox",
    "RunSetup",
    "SandboxChoice",
    "build_tools",
    "choose_sandbox",
    "mcp_sessions",
    "memory_scope",
    "run_skills",
    "server_sandbox",
]
