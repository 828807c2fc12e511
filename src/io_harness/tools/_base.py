"""The tool seam: what a tool is, what it returns, and the box that dispatches calls."""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from io_harness._validation import describe_validation
from io_harness.errors import ConfigError
from io_harness.messages import ToolCall, ToolSpec
from io_harness.tools._workspace import PathRefused

__all__ = ["Args", "Tool", "ToolFailure", "ToolOutcome", "Toolbox"]


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What one tool call produced: the observation text and the files it changed."""

    content: str
    is_error: bool = False
    changed: tuple[str, ...] = ()


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

    async def dispatch(self, call: ToolCall) -> ToolOutcome:
        """Run one call and turn every way it can fail into an error observation."""
        tool = self._tools.get(call.name)
        if tool is None:
            known = ", ".join(self._tools)
            return ToolOutcome(f"unknown tool {call.name!r}; the tools are: {known}", True)
        if not isinstance(call.arguments, Mapping):
            raw = call.arguments
            shown = raw if len(raw) <= 500 else f"{raw[:500]}... [+{len(raw) - 500} chars]"
            return ToolOutcome(f"{call.name}: the arguments are not a JSON object: {shown!r}", True)
        try:
            args = tool.args.model_validate(call.arguments)
        except ValidationError as exc:
            return ToolOutcome(
                f"{call.name}: invalid arguments: {describe_validation(exc, top='arguments')}", True
            )
        try:
            return await tool.invoke(args)
        except (ToolFailure, PathRefused) as exc:
            return ToolOutcome(f"{call.name}: {exc}", True)
        except OSError as exc:
            return ToolOutcome(f"{call.name}: {exc.strerror or exc}", True)
        except Exception as exc:  # a broken tool is an observation, never a crash of the run
            return ToolOutcome(f"{call.name} failed: {type(exc).__name__}: {exc}", True)
