"""The box of a run's tools: dispatch of each call, through the gate when there is one."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterable
from typing import Any

from io_harness.errors import ConfigError
from io_harness.messages import ToolCall, ToolSpec
from io_harness.policy._gate import Access, Gate
from io_harness.tools._base import (
    Args,
    HarnessTool,
    ToolContext,
    ToolKind,
    ToolOutcome,
    invoke,
    validated,
)
from io_harness.tools._gated import Authorized, Deferral, ResumePoint, authorize_call

__all__ = ["RunTools"]


class RunTools:
    """The tools a run offers, by name. Dispatch never raises: every failure is an outcome."""

    def __init__(self, tools: Iterable[HarnessTool[Any]]) -> None:
        self._tools: dict[str, HarnessTool[Any]] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ConfigError(f"two tools are named {tool.name!r}")
            self._tools[tool.name] = tool
        self.specs: tuple[ToolSpec, ...] = tuple(t.spec for t in self._tools.values())

    @property
    def names(self) -> tuple[str, ...]:
        """The tool names, in the order the model is shown them."""
        return tuple(self._tools)

    def __getitem__(self, name: str) -> HarnessTool[Any]:
        return self._tools[name]

    def with_kind(self, kind: ToolKind, tools: Iterable[HarnessTool[Any]]) -> RunTools:
        """A box whose tools of ``kind`` are ``tools`` (an MCP server's list changed)."""
        kept = [tool for tool in self._tools.values() if tool.kind != kind]
        return RunTools([*kept, *tools])

    def kind_of(self, name: str) -> ToolKind:
        """Which kind of tool ``name`` is, for the trace (``unknown``: no tool of the run)."""
        tool = self._tools.get(name)
        return tool.kind if tool is not None else "unknown"

    def acts(self, call: ToolCall) -> tuple[Access, ...] | None:
        """The acts ``call`` would perform; ``None`` when it names no tool or its arguments
        do not validate (it will not act)."""
        prepared = self._prepare(call)
        if isinstance(prepared, ToolOutcome):
            return None
        tool, args = prepared
        try:
            return tuple(tool.accesses(args))
        except Exception:  # a path the workspace refuses: the call will be refused too
            return None

    def _prepare(self, call: ToolCall) -> tuple[HarnessTool[Any], Args] | ToolOutcome:
        tool = self._tools.get(call.name)
        if tool is None:
            known = ", ".join(self._tools)
            return ToolOutcome(f"unknown tool {call.name!r}; the tools are: {known}", True)
        return validated(tool, call.name, call.arguments)

    async def dispatch(
        self,
        call: ToolCall,
        *,
        gate: Gate | None = None,
        context: ToolContext | None = None,
        resume_at: ResumePoint | None = None,
        before_invoke: Callable[[], None] | None = None,
    ) -> ToolOutcome | Deferral:
        """Run one call and turn every way it can fail into an error observation.

        With a ``gate``, every act of the call is checked first: a refusal is
        an observation, an act the approver defers stops the call
        (:class:`Deferral`). ``resume_at`` continues a deferred call at the
        act it stopped at, with the decision given for it; ``before_invoke``
        runs once every act is cleared, just before the tool. ``context`` is where
        the call runs (its run and step; the call's own id when not given).
        """
        context = context or ToolContext(call_id=call.id)
        prepared = self._prepare(call)
        if isinstance(prepared, ToolOutcome):
            return prepared
        tool, args = prepared
        if gate is None:
            return await _timed(tool, args, context)
        with gate.calling(call.id):
            checked = await authorize_call(gate, call, tool, args, resume_at)
            if not isinstance(checked, Authorized):
                return checked
            if before_invoke is not None:
                before_invoke()
            done = await _timed(tool, checked.args, context)
        if checked.rewritten is None:
            return done
        note = f"[the approver changed this call's arguments to {json.dumps(checked.rewritten)}]"
        return dataclasses.replace(
            done, content=f"{note}\n{done.content}", arguments=checked.rewritten
        )


async def _timed(tool: HarnessTool[Any], args: Args, context: ToolContext) -> ToolOutcome:
    """Run the tool, with how long it took for the trace."""
    started = time.perf_counter()
    done = await invoke(tool, args, context)
    return dataclasses.replace(done, duration=time.perf_counter() - started)
