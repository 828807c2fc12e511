"""The tool seam: what a tool is, what it returns, and how one call is validated and run."""

from __future__ import annotations

import abc
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from io_harness._arguments import arguments_problem
from io_harness._validation import describe_validation
from io_harness.messages import ToolSpec
from io_harness.policy._gate import Access
from io_harness.policy._rules import Act
from io_harness.tools._workspace import PathRefused

if TYPE_CHECKING:
    from io_harness.sandbox import SandboxEvent

__all__ = [
    "Args",
    "HarnessTool",
    "ToolContext",
    "ToolFailure",
    "ToolKind",
    "ToolOutcome",
    "invoke",
    "schema_without_titles",
    "validated",
]

ToolKind = Literal["builtin", "caller", "mcp", "unknown"]
"""Which kind of tool answered a call; ``unknown`` for a name no tool of the run has."""


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What one tool call produced: the observation text and the files it changed."""

    content: str
    is_error: bool = False
    changed: tuple[str, ...] = ()
    arguments: dict[str, Any] | None = None
    """The arguments the call ran with, when an approver rewrote the model's."""
    events: tuple[SandboxEvent, ...] = ()
    """What the sandbox did for the call (``exec``), for the trace."""
    error: str | None = None
    """What went wrong inside the tool (its exception, a timeout), for the trace."""
    duration: float | None = None
    """Seconds the tool ran; ``None`` when it did not run (refused, bad arguments)."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Where a call runs: its run, its step and its own id, passed to the tool with it."""

    run_id: str = ""
    step: int = 0
    call_id: str = ""


class ToolFailure(Exception):
    """Raised inside a tool to answer the model with an error observation."""


class Args(BaseModel):
    """Base of every tool's argument model: unknown fields are errors the model sees."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


A = TypeVar("A", bound=Args)


class HarnessTool(abc.ABC, Generic[A]):
    """A tool as the harness runs it: a name, a description, typed arguments, declared acts.

    The built-ins subclass it; a caller's own tools are adapted to it, so one
    dispatch path (validation, the gate, the trace) serves every kind.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    args: type[A]
    kind: ClassVar[ToolKind] = "builtin"
    """Which kind of tool answers, for the trace: ``builtin``, ``caller`` or ``mcp``."""
    reads_only: ClassVar[bool] = False
    """The tool never changes anything (a read, a search): a step of such calls is not
    journaled, since redoing it repeats no effect."""

    @property
    def spec(self) -> ToolSpec:
        """How the model is told about this tool."""
        return _spec(self.name, self.description, self.args)

    @abc.abstractmethod
    async def invoke(self, args: A, context: ToolContext) -> ToolOutcome:
        """Run with validated arguments in ``context`` (the run, step and call); raise
        :class:`ToolFailure` to report an error."""

    def accesses(self, args: A) -> Sequence[Access]:
        """The acts this call performs, each checked by the gate before it runs.

        A tool that is not a built-in file tool is an exec of its own name.
        Paths are canonical: resolved against the workspace, symlinks followed.
        """
        return (Access(Act.EXEC, self.name),)

    def preview(self, args: A, *, show_current: bool = True) -> str | None:
        """What the call would change, shown to an approver (a write's diff).

        ``show_current`` is false when the policy does not let the agent read
        the target: the preview must not show its current content then.
        """
        return None

    def arguments_problem(self, args: A) -> str | None:
        """What is wrong with arguments ``args`` passed (an approver's rewrite), if known.

        The built-ins' typed arguments say it already; a caller's tool whose
        arguments reach it unchecked may say it here.
        """
        return None


@functools.cache
def _spec(name: str, description: str, args: type[Args]) -> ToolSpec:
    # pydantic builds a schema in about half a millisecond; a built-in's never changes,
    # and every run (every sub-agent of a tree) builds its tools anew.
    schema = schema_without_titles(args.model_json_schema())
    return ToolSpec(name=name, description=description, parameters=schema)


_NAME_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})
"""Schema keys whose children are names (a property may be called ``title``)."""
_VALUES = frozenset({"default", "const", "enum", "examples"})
"""Schema keys whose children are values, kept as they are (a default may hold a ``title``)."""


def schema_without_titles(schema: Any, *, names: bool = False) -> Any:
    """The JSON schema without pydantic's ``title`` keys; a property named ``title`` stays.

    pydantic titles every model and property; models read the names already,
    so the titles are noise in every request.
    """
    if isinstance(schema, dict):
        return {
            key: value
            if key in _VALUES and not names
            else schema_without_titles(value, names=key in _NAME_MAPS and not names)
            for key, value in schema.items()
            if names or key != "title"
        }
    if isinstance(schema, list):
        return [schema_without_titles(item) for item in schema]
    return schema


def validated(
    tool: HarnessTool[Any], name: str, arguments: object
) -> tuple[HarnessTool[Any], Args] | ToolOutcome:
    """The call's arguments checked against the tool's model, or the error observation."""
    if not isinstance(arguments, Mapping):
        return ToolOutcome(f"{name}: {arguments_problem(str(arguments))}", True)
    try:
        return tool, tool.args.model_validate(arguments)
    except ValidationError as exc:
        return ToolOutcome(
            f"{name}: invalid arguments: {describe_validation(exc, top='arguments')}", True
        )


async def invoke(
    tool: HarnessTool[Any], args: Args, context: ToolContext | None = None
) -> ToolOutcome:
    """Run a validated call; every exception becomes an error observation."""
    try:
        return await tool.invoke(args, context or ToolContext())
    except (ToolFailure, PathRefused) as exc:
        return ToolOutcome(f"{tool.name}: {exc}", True)
    except OSError as exc:
        return ToolOutcome(f"{tool.name}: {exc.strerror or exc}", True)
    except Exception as exc:  # a broken tool is an observation, never a crash of the run
        error = f"{type(exc).__name__}: {exc}"
        return ToolOutcome(f"{tool.name} failed: {error}", True, error=error)
