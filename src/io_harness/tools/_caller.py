"""The caller's own tools: the :class:`Tool` protocol, the :class:`Toolbox`, and their adapter.

A caller's tool is any object with ``spec()`` and an async ``invoke()``. The
:class:`Toolbox` holds a program's tools and says, before the first provider
call, what is wrong with any of them (:meth:`Toolbox.validate`). Each tool is
then adapted to a :class:`CallerTool`, so its calls go the one way every call
goes: arguments checked, each act through the gate, the outcome in the trace.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pydantic import ConfigDict

from io_harness.errors import ConfigError
from io_harness.messages import ToolSpec
from io_harness.tools._base import Args, HarnessTool, ToolContext, ToolFailure, ToolOutcome
from io_harness.tools._names import tool_name_problem

__all__ = [
    "DEFAULT_TOOL_TIMEOUT",
    "MAX_RESULT_CHARS",
    "CallerArgs",
    "CallerTool",
    "Tool",
    "Toolbox",
    "limit_problem",
    "spec_hash",
]

DEFAULT_TOOL_TIMEOUT = 60.0
"""Seconds a caller tool's call may take when the tool names no ``timeout``."""
MAX_RESULT_CHARS = 32_000
"""Characters of a caller tool's result the model is shown when it names no cap."""


@runtime_checkable
class Tool(Protocol):
    """A tool the caller's program gives the agent.

    ``spec()`` says how the model is told about the tool; the harness calls it
    once per run (a :class:`Toolbox` calls it once, when the tool is added;
    a harness builds a box for each run) and its name must be stable for the
    run. ``invoke(arguments)`` runs one
    call with the JSON object the model sent and returns the text the model
    reads. Raising :class:`~io_harness.ToolFailure` answers with that
    message as an error observation; any other exception, a timeout or a
    result that is not ``str`` is also an error observation, never a failure
    of the run.

    Two attributes are read when present: ``timeout`` (seconds a call may
    take; default :data:`DEFAULT_TOOL_TIMEOUT`) and ``max_result_chars`` (the
    longest result shown, longer ones cut with a marker saying so; default
    :data:`MAX_RESULT_CHARS`). ``None`` means the default.

    The bound: a caller tool runs in the harness's process with the program's
    privileges, outside the sandbox. Each call is checked by the run's policy
    as an ``exec`` of the tool's name, so the policy decides whether it is
    called, not what it does once running.
    """

    def spec(self) -> ToolSpec:
        """The tool's name, description and JSON Schema of its arguments."""
        ...

    async def invoke(self, arguments: dict[str, Any]) -> str:
        """Run one call with the model's arguments; return what the model reads."""
        ...


def limit_problem(timeout: object, max_result_chars: object) -> str | None:
    """Why a tool's ``timeout`` or ``max_result_chars`` is not usable, or ``None``.

    ``None`` for either means the default.
    """
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        return f"its timeout {timeout!r} is not a positive number of seconds"
    if max_result_chars is not None and (
        isinstance(max_result_chars, bool)
        or not isinstance(max_result_chars, int)
        or max_result_chars <= 0
    ):
        return f"its max_result_chars {max_result_chars!r} is not a positive int"
    return None


@dataclass(frozen=True, slots=True)
class _Entry:
    """One tool of a box with what was learnt of it when it was added."""

    tool: Tool
    label: str
    spec: ToolSpec | None
    problem: str | None


def _label(obj: object) -> str:
    name = getattr(obj, "__name__", None)
    return name if isinstance(name, str) else f"{type(obj).__name__} object"


def _examined(obj: Tool) -> _Entry:
    """Ask one object for its spec once and note the first thing wrong with it."""
    label = _label(obj)
    spec: ToolSpec | None = None
    problem: str | None = None
    timeout = getattr(obj, "timeout", None)
    max_chars = getattr(obj, "max_result_chars", None)
    spec_method, invoke_method = getattr(obj, "spec", None), getattr(obj, "invoke", None)
    if not callable(spec_method) or not callable(invoke_method):
        missing = "spec()" if not callable(spec_method) else "invoke()"
        problem = f"it is not a Tool: it has no {missing} method"
    elif not inspect.iscoroutinefunction(invoke_method):
        problem = "it is not a Tool: its invoke() is not async (async def)"
    else:
        try:
            declared = spec_method()
        except Exception as exc:
            problem = f"its spec() raised {type(exc).__name__}: {exc}"
        else:
            if isinstance(declared, ToolSpec):
                spec, label = declared, declared.name or label
                problem = (
                    tool_name_problem(declared.name)
                    or _parameters_problem(declared)
                    or _json_problem(declared)
                )
            else:
                problem = f"its spec() returned {type(declared).__name__}, not a ToolSpec"
    problem = problem or limit_problem(timeout, max_chars)
    return _Entry(tool=obj, label=label, spec=spec, problem=problem)


def _json_problem(spec: ToolSpec) -> str | None:
    """Why the spec cannot be sent to a model or stored (it is not JSON), if it cannot."""
    try:
        spec_hash(spec)
    except ValueError as exc:  # pydantic's serialisation errors, json's alike
        return f"its spec is not JSON: {exc}"
    return None


def _parameters_problem(spec: ToolSpec) -> str | None:
    parameters = spec.parameters
    if parameters.get("type") != "object" or not isinstance(parameters.get("properties", {}), dict):
        return 'its parameters are not a JSON-schema object ({"type": "object", ...})'
    return None


class Toolbox:
    """The caller's tools for a run: immutable, each tool's spec asked for once.

    ``Toolbox([search, lookup])`` or ``Toolbox().with_(search).with_(lookup)``.
    Building a box never raises; :meth:`validate` says what is wrong (the
    harness calls it before the first provider call). :meth:`names`,
    :meth:`specs`, :meth:`items`, :meth:`get`, :meth:`spec_of` and
    :meth:`owns` describe the tools whose ``spec()`` gave a
    :class:`~io_harness.messages.ToolSpec`, in order.
    """

    __slots__ = ("_entries",)

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._entries: tuple[_Entry, ...] = tuple(_examined(tool) for tool in tools)

    @classmethod
    def _of(cls, entries: tuple[_Entry, ...]) -> Toolbox:
        box = cls.__new__(cls)
        box._entries = entries
        return box

    def with_(self, tool: Tool) -> Toolbox:
        """A new box holding this box's tools and ``tool``; this box is unchanged."""
        return Toolbox._of((*self._entries, _examined(tool)))

    def names(self) -> tuple[str, ...]:
        """The tools' names, in the order they were added."""
        return tuple(entry.spec.name for entry in self._entries if entry.spec is not None)

    def specs(self) -> tuple[ToolSpec, ...]:
        """The tools' specs as their ``spec()`` gave them, in the order they were added."""
        return tuple(entry.spec for entry in self._entries if entry.spec is not None)

    def owns(self, name: str) -> bool:
        """Whether a tool of this box is called ``name``."""
        return self._entry(name) is not None

    def get(self, name: str) -> Tool | None:
        """The tool called ``name`` (the first, if two are), or ``None``."""
        entry = self._entry(name)
        return entry.tool if entry is not None else None

    def spec_of(self, name: str) -> ToolSpec:
        """The spec of the tool called ``name``, as asked for when it was added.

        Raises :class:`KeyError` when no tool of this box is called ``name``.
        """
        entry = self._entry(name)
        if entry is None or entry.spec is None:
            raise KeyError(name)
        return entry.spec

    def items(self) -> tuple[tuple[str, Tool], ...]:
        """Each tool's name and the tool, in the order they were added."""
        return tuple((e.spec.name, e.tool) for e in self._entries if e.spec is not None)

    def validate(self) -> None:
        """Raise :class:`~io_harness.errors.ConfigError` naming each bad tool and why.

        A tool is bad when it is not a :class:`Tool` (no ``spec()`` or
        ``invoke()``, or ``invoke`` not async), its ``spec()`` raised or gave
        something else than a ``ToolSpec``, its name is empty, a built-in's,
        under the ``mcp__`` prefix, not 1-64 of ``[a-zA-Z0-9_-]`` or another
        tool's, its parameters are not a JSON-schema object, its ``timeout``
        is not a positive number or its ``max_result_chars`` not a positive int.
        """
        problems = [f"caller tool {e.label!r}: {e.problem}" for e in self._entries if e.problem]
        seen: set[str] = set()
        for name in self.names():
            if name in seen:
                problems.append(f"caller tool {name!r}: two tools are named {name!r}")
            seen.add(name)
        if problems:
            raise ConfigError("; ".join(dict.fromkeys(problems)))

    def _entry(self, name: str) -> _Entry | None:
        for entry in self._entries:
            if entry.spec is not None and entry.spec.name == name:
                return entry
        return None

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Tool]:
        return (entry.tool for entry in self._entries)

    def __repr__(self) -> str:
        return f"Toolbox({[entry.label for entry in self._entries]!r})"


def spec_hash(spec: ToolSpec) -> str:
    """The sha256 (hex) of the spec's canonical JSON: a tool changed at resume changes it."""
    canonical = json.dumps(
        spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


class CallerArgs(Args):
    """Any JSON object: the caller's tool checks its own arguments."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=False)


class CallerTool(HarnessTool[CallerArgs]):
    """One caller :class:`Tool` as the harness runs it: gated, bounded, never raising.

    Its ``spec`` is the caller's, verbatim. A call is an ``exec`` of its name
    for the policy. Whatever the tool does wrong is the call's observation:
    ``ToolFailure`` gives its message, a timeout, another exception and a
    result that is not ``str`` also set ``error`` for the trace.
    """

    kind = "caller"
    args = CallerArgs

    def __init__(self, tool: Tool, spec: ToolSpec) -> None:
        self.tool = tool
        self._spec = spec
        self.timeout: float = getattr(tool, "timeout", None) or DEFAULT_TOOL_TIMEOUT
        """Seconds a call may take: the tool's own ``timeout``, else the default."""
        self.max_result_chars: int = getattr(tool, "max_result_chars", None) or MAX_RESULT_CHARS
        """The longest text shown, a failure's included: the tool's own cap, else the default."""

    # ``name`` and ``description`` are class attributes of the built-ins; here
    # they are the caller's spec's, so each is a property (with a setter that
    # refuses, to override the writable attribute).
    @property
    def name(self) -> str:
        """The tool's name, from its spec."""
        return self._spec.name

    @name.setter
    def name(self, value: str) -> None:
        raise AttributeError("a caller tool's name is its spec's")

    @property
    def description(self) -> str:
        """The tool's description, from its spec."""
        return self._spec.description

    @description.setter
    def description(self, value: str) -> None:
        raise AttributeError("a caller tool's description is its spec's")

    @property
    def spec(self) -> ToolSpec:
        """The caller's spec, unchanged."""
        return self._spec

    def arguments_problem(self, args: CallerArgs) -> str | None:
        """What the tool's own ``check_arguments`` finds wrong (``@tool`` functions have one)."""
        check = getattr(self.tool, "check_arguments", None)
        return check(dict(args.model_extra or {})) if callable(check) else None

    async def invoke(self, args: CallerArgs, context: ToolContext) -> ToolOutcome:
        """Run the caller's tool under its timeout; bound its result to its cap."""
        deadline = asyncio.timeout(self.timeout)
        try:
            async with deadline:
                result = await self.tool.invoke(dict(args.model_extra or {}))
        except TimeoutError as exc:
            if not deadline.expired():
                return self._failed(exc)
            error = f"timeout after {self.timeout:g} s"
            return ToolOutcome(
                f"{self.name}: the call was ended after {self.timeout:g} s (its timeout)",
                True,
                error=error,
            )
        except ToolFailure as exc:
            return ToolOutcome(self._capped(f"{self.name}: {exc}", "text"), True)
        except Exception as exc:  # a broken tool is an observation, never a crash of the run
            return self._failed(exc)
        if not isinstance(result, str):
            error = f"returned {type(result).__name__}, not str"
            return ToolOutcome(
                f"{self.name} failed: the tool {error} (a Tool's invoke() must return text)",
                True,
                error=error,
            )
        return ToolOutcome(self._capped(result, "result"))

    def _failed(self, exc: Exception) -> ToolOutcome:
        error = self._capped(f"{type(exc).__name__}: {exc}", "error")
        return ToolOutcome(f"{self.name} failed: {error}", True, error=error)

    def _capped(self, text: str, what: str) -> str:
        """``text`` within the tool's cap; what is cut is said, never dropped silently."""
        cap = self.max_result_chars
        if len(text) <= cap:
            return text
        return (
            f"{text[:cap]}\n[... {len(text) - cap} characters cut: the {what} was "
            f"{len(text)} characters, over this tool's cap of {cap} ...]"
        )
