"""A run's role: its declared tools composed anew for every model call, and what it may call.

A contract that names a role (``role = "NAME"``) runs under that role of the
harness's roles file: the role's system prompt goes before the harness's,
and every request's ``tools`` array is the composition of the harness's
injected tools (procedure tools and the caller's), the role's declared tools
with committed schemas or built into the run, and the names the history
already calls. Only the injected and elected tools may be called; any other
name is refused in-band with the role's toolset named. A permitted call still
passes the policy. A role that could call nothing at all is a
:class:`ConfigError` before the run's first model call: every step of it would
be refused.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from io_harness.errors import ConfigError
from io_harness.messages import Message, ToolSpec
from io_harness.roles._compose import SCHEMAS_DIR, Composition, compose
from io_harness.roles._file import Role
from io_harness.tools import RunTools

__all__ = ["PROCEDURE_TOOLS", "RunRole", "no_tools"]

PROCEDURE_TOOLS = ("read_skill", "remember", "forget", "spawn_agent")
"""The harness's own procedure tools: injected for a role when the run has them."""


@dataclass(frozen=True, slots=True)
class RunRole:
    """The role a run works under, with what the harness injects for it."""

    role: Role
    workspace: Path
    injected: tuple[ToolSpec, ...]
    readable: Callable[[str], bool] | None = None
    """Whether the run's policy lets a workspace path be read outright (a committed file)."""
    builtins: tuple[ToolSpec, ...] = ()
    """The run's built-in tools, elected with their own schemas when the role declares them."""

    @classmethod
    def of(
        cls,
        role: Role,
        workspace: Path,
        tools: RunTools,
        readable: Callable[[str], bool] | None = None,
    ) -> RunRole:
        """``role`` over ``workspace``: its procedure tools first, then the caller's; the run's
        other built-ins electable.

        A role that may call no tool (nothing injected, nothing declared elected)
        is a :class:`ConfigError` naming it and its declared tools.
        """
        procedures = [tools[name].spec for name in PROCEDURE_TOOLS if name in tools.names]
        callers = [tools[n].spec for n in tools.names if tools.kind_of(n) == "caller"]
        builtins = tuple(
            tools[n].spec
            for n in tools.names
            if tools.kind_of(n) == "builtin" and n not in PROCEDURE_TOOLS
        )
        run_role = cls(role, workspace, (*procedures, *callers), readable, builtins)
        if not run_role.compose(()).permitted:
            raise ConfigError(f"{no_tools(role, workspace)}, and the harness injects none")
        return run_role

    @property
    def name(self) -> str:
        """The role's name."""
        return self.role.name

    def compose(self, history: Sequence[Message]) -> Composition:
        """The tools array of a request whose messages are ``history``."""
        return compose(
            self.role.tools,
            self.workspace,
            self.injected,
            history,
            readable=self.readable,
            builtins=self.builtins,
        )

    def system_prompt(self, harness_prompt: str) -> str:
        """The role's system prompt, then the harness's (the task's subject and condition)."""
        if not self.role.system_prompt:
            return harness_prompt
        return f"{self.role.system_prompt.strip()}\n\n{harness_prompt}"


def no_tools(role: Role, workspace: Path) -> str:
    """Why ``role`` may call nothing of its own in ``workspace``: it declares nothing, or
    nothing it declares is a built-in tool or has a committed schema."""
    if not role.tools:
        return f"the role {role.name!r} may call no tools: it declares none"
    return (
        f"the role {role.name!r} may call no tools: none of its declared tools "
        f"({', '.join(role.tools)}) is a built-in tool of the run or has a schema in "
        f"{workspace / SCHEMAS_DIR}{os.sep}"
    )
