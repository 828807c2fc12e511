"""Direct execution: the ``NO_SANDBOX`` opt-out, with no containment at all."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from io_harness._process import run_process
from io_harness.sandbox._types import SandboxOutcome

__all__ = ["DIRECT", "run_direct"]

DIRECT = "none"
"""The backend name the trace records for a command run without a sandbox."""


async def run_direct(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
) -> SandboxOutcome:
    """Run ``argv`` as a plain child process group: only the wall clock and output are bounded."""
    outcome = await run_process(argv, cwd=cwd, timeout=timeout, env=env, stdin=stdin)
    return SandboxOutcome(
        backend=DIRECT,
        argv=outcome.argv,
        exit_code=outcome.exit_code,
        signal=outcome.signal,
        cap_hit="wall" if outcome.timed_out else None,
        stdout=outcome.stdout,
        stderr=outcome.stderr,
        truncated=outcome.truncated,
        duration=outcome.duration,
        spawn_error=outcome.spawn_error,
    )
