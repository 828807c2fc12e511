"""The ``exec`` tool: one command, no shell, run in the sandbox in the workspace.

The call is one ``exec`` act on the program (``argv[0]``, as given), with the
whole argv recorded, so the policy's rules on ``exec`` allow, ask about or
refuse it like any other act. What the command printed comes back bounded:
the head and the tail of each stream, with what was cut said.
"""

from __future__ import annotations

import dataclasses
import shlex
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from io_harness.policy._gate import Access, canonical_argv

# From the modules, not the package: the sandbox package imports the workspace's confinement.
from io_harness.sandbox._direct import DIRECT, run_direct
from io_harness.sandbox._types import NetCheck, SandboxEvent, SandboxLimits, SandboxOutcome
from io_harness.tools._base import Args, HarnessTool, ToolContext, ToolOutcome
from io_harness.tools._workspace import Workspace

if TYPE_CHECKING:
    from io_harness.sandbox._types import Sandbox

__all__ = ["EXEC_HEAD_BYTES", "EXEC_TAIL_BYTES", "ExecTool", "bounded", "exec_observation"]

EXEC_HEAD_BYTES = 8 * 1024
"""Bytes of each stream's start the model is shown."""
EXEC_TAIL_BYTES = 8 * 1024
"""Bytes of each stream's end the model is shown."""


class ExecArgs(Args):
    argv: list[str] = Field(
        min_length=1,
        description=(
            'The program and its arguments, e.g. ["python", "-m", "pytest", "-q"]. No shell: '
            "pipes, redirections, globs and variables are not interpreted."
        ),
    )

    @field_validator("argv")
    @classmethod
    def _program_named(cls, argv: list[str]) -> list[str]:
        if not argv[0] or "\x00" in "".join(argv):
            raise ValueError("the program (argv[0]) is empty, or an argument holds a NUL")
        return argv


class ExecTool(HarnessTool[ExecArgs]):
    """Runs one command in the workspace root, in the run's sandbox (``None``: directly)."""

    name = "exec"
    description = (
        "Run one command in the workspace root and see its exit status and output "
        f"(the first {EXEC_HEAD_BYTES // 1024} KiB and the last {EXEC_TAIL_BYTES // 1024} KiB "
        "of each stream). No shell. The harness runs it in a sandbox: writes outside the "
        "workspace and network connections may be refused, and caps on time, memory, "
        "processes and output kill it."
    )
    args = ExecArgs

    def __init__(
        self,
        workspace: Workspace,
        sandbox: Sandbox | None,
        wall_end: float | None = None,
        net_check: NetCheck | None = None,
    ) -> None:
        self.workspace = workspace
        self.sandbox = sandbox
        self.wall_end = wall_end
        """Unix time the run's wall budget ends: a command's wall cap is cut to it."""
        self.net_check = net_check
        """Asked for each connection through the sandbox's proxy (``allow_list`` only)."""

    def accesses(self, args: ExecArgs) -> Sequence[Access]:
        return (canonical_argv(args.argv),)

    def _limits(self) -> SandboxLimits:
        limits = self.sandbox.config.limits if self.sandbox is not None else SandboxLimits()
        if self.wall_end is None:
            return limits
        # At least a second: a call made as the budget runs out still gets an answer.
        left = max(1.0, self.wall_end - time.time())
        return limits.model_copy(update={"wall_seconds": min(limits.wall_seconds, left)})

    async def invoke(self, args: ExecArgs, context: ToolContext) -> ToolOutcome:
        limits = self._limits()
        if self.sandbox is None:
            outcome = await run_direct(
                args.argv, cwd=self.workspace.root, timeout=limits.wall_seconds
            )
            # Nothing contained it, so there is no sandbox to say what it did: the trace
            # still records that it ran, and uncontained.
            ran = SandboxEvent(
                "exec", DIRECT, {"argv": list(outcome.argv), "duration": outcome.duration}
            )
            capped = (
                ()
                if outcome.cap_hit is None
                else (SandboxEvent("cap_hit", DIRECT, {"cap": outcome.cap_hit}),)
            )
            outcome = dataclasses.replace(outcome, events=(ran, *capped))
        else:
            # The sandbox's own mode (``workspace_write`` unless configured otherwise).
            outcome = await self.sandbox.run(
                args.argv, workdir=self.workspace.root, limits=limits, net_check=self.net_check
            )
        ok = outcome.exit_code == 0 and outcome.cap_hit is None and outcome.spawn_error is None
        return ToolOutcome(exec_observation(outcome), is_error=not ok, events=outcome.events)


def exec_observation(outcome: SandboxOutcome) -> str:
    """What the model reads of one command: how it ended, the command, each stream bounded."""
    lines = [outcome.summary, f"$ {shlex.join(outcome.argv)}"]
    if outcome.cap_hit is not None:
        lines.append(_cap_note(outcome))
    if outcome.undone:
        lines.append(
            "[the command changed files that git, a shell or an editor would run later; the "
            "harness undid it: " + "; ".join(outcome.undone) + "]"
        )
    if outcome.truncated and outcome.cap_hit != "output":
        lines.append("[the sandbox kept only part of the output; the cut is marked in it]")
    for name, text in (("stdout", outcome.stdout), ("stderr", outcome.stderr)):
        lines.append(bounded(text, name))
    return "\n".join(lines)


def _cap_note(outcome: SandboxOutcome) -> str:
    """The line that says which cap the command went past (and, for the disk cap, by how much)."""
    cap = outcome.cap_hit
    if cap != "disk":
        return (
            f"[the command was killed because it went past the sandbox's {cap} cap; "
            "its output so far follows]"
        )
    wrote = f"its writes added {outcome.written_bytes} bytes to the folders it may write"
    if outcome.exit_code is not None:
        return f"[the command went past the sandbox's disk cap ({wrote}) before it ended]"
    return (
        f"[the command was killed because it went past the sandbox's disk cap ({wrote}); "
        "its output so far follows]"
    )


def bounded(text: str, name: str, head: int = EXEC_HEAD_BYTES, tail: int = EXEC_TAIL_BYTES) -> str:
    """One stream headed by its name: whole, or its first ``head`` and last ``tail`` bytes.

    A cut says how many bytes it left out. A character split by a cut is dropped.
    """
    data = text.encode("utf-8", "replace")
    if not data:
        return f"{name}: (empty)"
    if len(data) <= head + tail:
        return f"{name} ({len(data)} bytes):\n{text.rstrip(chr(10))}"
    first = data[:head].decode("utf-8", "ignore")
    last = data[-tail:].decode("utf-8", "ignore")
    cut = len(data) - head - tail
    return (
        f"{name} ({len(data)} bytes; the first {head} and the last {tail} are shown):\n"
        f"{first}\n[... {cut} bytes of {name} cut here ...]\n{last.rstrip(chr(10))}"
    )
