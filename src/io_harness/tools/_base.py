"""The tool seam: what a tool is, what it returns, and the box that dispatches calls."""

from __future__ import annotations

import abc
import json
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from io_harness._validation import describe_validation
from io_harness.errors import ConfigError
from io_harness.messages import ToolCall, ToolSpec
from io_harness.policy._approval import ApprovalRequest, Decision
from io_harness.policy._gate import Access, Cleared, Deferred, Gate, Refused
from io_harness.policy._rules import Act, Effect, Verdict
from io_harness.tools._workspace import PathRefused

__all__ = ["Args", "Deferral", "Tool", "ToolFailure", "ToolOutcome", "Toolbox"]


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What one tool call produced: the observation text and the files it changed."""

    content: str
    is_error: bool = False
    changed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Deferral:
    """A call stopped at an act the approver will decide later.

    ``cleared`` acts of the call were already allowed; the next resume starts
    at the one ``request`` asks about.
    """

    request: ApprovalRequest
    cleared: int


class ToolFailure(Exception):
    """Raised inside a tool to answer the model with an error observation."""


class Args(BaseModel):
    """Base of every tool's argument model: unknown fields are errors the model sees."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


A = TypeVar("A", bound=Args)


class Tool(abc.ABC, Generic[A]):
    """A tool the model may call: a name, a description and typed arguments."""

    name: ClassVar[str]
    description: ClassVar[str]
    args: type[A]

    @property
    def spec(self) -> ToolSpec:
        """How the model is told about this tool."""
        schema = _strip_titles(self.args.model_json_schema())
        return ToolSpec(name=self.name, description=self.description, parameters=schema)

    @abc.abstractmethod
    async def invoke(self, args: A) -> ToolOutcome:
        """Run with validated arguments; raise :class:`ToolFailure` to report an error."""

    def accesses(self, args: A) -> Sequence[Access]:
        """The acts this call performs, each checked by the gate before it runs.

        A tool that is not a built-in file tool is an exec of its own name.
        Paths are canonical: resolved against the workspace, symlinks followed.
        """
        return (Access(Act.EXEC, self.name),)

    def preview(self, args: A) -> str | None:
        """What the call would change, shown to an approver (a write's diff)."""
        return None


def _strip_titles(schema: Any) -> Any:
    # pydantic titles every property; models read the name already, so they are noise.
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


class Toolbox:
    """The tools a run offers, by name. Dispatch never raises: every failure is an outcome."""

    def __init__(self, tools: Iterable[Tool[Any]]) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ConfigError(f"two tools are named {tool.name!r}")
            self._tools[tool.name] = tool
        self.specs: tuple[ToolSpec, ...] = tuple(t.spec for t in self._tools.values())

    @property
    def names(self) -> tuple[str, ...]:
        """The tool names, in the order the model is shown them."""
        return tuple(self._tools)

    def __getitem__(self, name: str) -> Tool[Any]:
        return self._tools[name]

    def _prepare(self, call: ToolCall) -> tuple[Tool[Any], Args] | ToolOutcome:
        tool = self._tools.get(call.name)
        if tool is None:
            known = ", ".join(self._tools)
            return ToolOutcome(f"unknown tool {call.name!r}; the tools are: {known}", True)
        return _validated(tool, call.name, call.arguments)

    async def dispatch(
        self,
        call: ToolCall,
        *,
        gate: Gate | None = None,
        decision: Decision | None = None,
        cleared: int = 0,
    ) -> ToolOutcome | Deferral:
        """Run one call and turn every way it can fail into an error observation.

        With a ``gate``, every act of the call is checked first: a refusal is
        an observation, an act the approver defers stops the call
        (:class:`Deferral`). ``decision`` and ``cleared`` resume a deferred
        call: the first ``cleared`` acts were allowed and ``decision`` answers
        the next.
        """
        prepared = self._prepare(call)
        if isinstance(prepared, ToolOutcome):
            return prepared
        tool, args = prepared
        note = ""
        if gate is not None:
            gate.call_id = call.id
            checked = await self._authorize(gate, call, tool, args, decision, cleared)
            if not isinstance(checked, tuple):
                return checked
            args, note = checked
        done = await _invoke(tool, args)
        if note:
            return ToolOutcome(f"{note}\n{done.content}", done.is_error, done.changed)
        return done

    async def _authorize(
        self,
        gate: Gate,
        call: ToolCall,
        tool: Tool[Any],
        args: Args,
        decision: Decision | None,
        cleared: int,
    ) -> tuple[Args, str] | ToolOutcome | Deferral:
        try:
            accesses = list(tool.accesses(args))
        except PathRefused as exc:
            return ToolOutcome(f"{call.name}: {exc}", True)
        for index in range(cleared, len(accesses)):
            access = accesses[index]

            def request(verdict: Verdict, access: Access = access) -> ApprovalRequest:
                return ApprovalRequest(
                    id=secrets.token_hex(6),
                    run_id=gate.run_id,
                    step=gate.step,
                    call_id=call.id,
                    tool=call.name,
                    arguments=dict(args.model_dump(mode="json")),
                    act=access.act,
                    target=verdict.target,
                    argv=access.argv,
                    diff=_preview(tool, args),
                    verdict=verdict,
                )

            clearance = await gate.authorize(access, request, decision)
            decision = None
            if isinstance(clearance, Refused):
                return ToolOutcome(f"{call.name}: {clearance.observation}", True)
            if isinstance(clearance, Deferred):
                return Deferral(clearance.request, index)
            assert isinstance(clearance, Cleared)
            if clearance.decision is not None and clearance.decision.modified is not None:
                return self._rewritten(gate, call, tool, clearance.decision.modified)
        return args, ""

    @staticmethod
    def _rewritten(
        gate: Gate, call: ToolCall, tool: Tool[Any], modified: dict[str, Any]
    ) -> tuple[Args, str] | ToolOutcome:
        """An approver's rewrite of a call: validated, and every act checked again.

        The approver wrote the new call, so an ask is taken as approved; a deny
        still refuses it.
        """
        checked = _validated(tool, call.name, modified)
        if isinstance(checked, ToolOutcome):
            return ToolOutcome(
                f"the approver's rewrite is not a valid call: {checked.content}", True
            )
        _, args = checked
        try:
            accesses = tool.accesses(args)
        except PathRefused as exc:
            return ToolOutcome(f"{call.name}: the approver's rewrite: {exc}", True)
        for access in accesses:
            verdict = gate.verdict(access)
            if verdict.effect is Effect.DENY:
                gate.record(access, verdict, "refused", "policy")
                return ToolOutcome(
                    f"{call.name}: the approver's rewrite is refused by the policy: "
                    f"{verdict.describe()}",
                    True,
                )
            gate.record(access, verdict, "approved", "approver's rewrite")
        note = f"[the approver changed this call's arguments to {json.dumps(modified)}]"
        return args, note


def _validated(
    tool: Tool[Any], name: str, arguments: object
) -> tuple[Tool[Any], Args] | ToolOutcome:
    if not isinstance(arguments, Mapping):
        raw = str(arguments)
        shown = raw if len(raw) <= 500 else f"{raw[:500]}... [+{len(raw) - 500} chars]"
        return ToolOutcome(f"{name}: the arguments are not a JSON object: {shown!r}", True)
    try:
        return tool, tool.args.model_validate(arguments)
    except ValidationError as exc:
        return ToolOutcome(
            f"{name}: invalid arguments: {describe_validation(exc, top='arguments')}", True
        )


def _preview(tool: Tool[Any], args: Args) -> str | None:
    try:
        return tool.preview(args)
    except Exception as exc:  # a preview that fails must not stop the approval
        return f"(no preview: {type(exc).__name__}: {exc})"


async def _invoke(tool: Tool[Any], args: Args) -> ToolOutcome:
    try:
        return await tool.invoke(args)
    except (ToolFailure, PathRefused) as exc:
        return ToolOutcome(f"{tool.name}: {exc}", True)
    except OSError as exc:
        return ToolOutcome(f"{tool.name}: {exc.strerror or exc}", True)
    except Exception as exc:  # a broken tool is an observation, never a crash of the run
        return ToolOutcome(f"{tool.name} failed: {type(exc).__name__}: {exc}", True)
