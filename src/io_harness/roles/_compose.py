"""Composing a role's toolset: injection, then election, then closure.

The tools array a role's agent is offered is built by three rules, in order:

1. **Injection**: the ``injected`` specs (the harness's procedure tools and
   the caller's registered tools), in the order given, come first.
2. **Election**: each declared name, in declared order, that injection did not
   take and whose schema the workspace commits at
   ``descriptions/tools/<name>.json``. The schema's JSON object is sent
   verbatim as the tool's parameters; the description is the ``description``
   of the YAML frontmatter of ``descriptions/skills/<name>.md`` (``""`` when
   that file, its frontmatter or the key is absent). A declared name without
   a schema file that names one of the run's ``builtins`` (the harness's own
   tools, whose schemas it holds) is elected with that built-in's schema, and
   its description unless the workspace commits a non-empty one; any other
   declared name without a schema file is dropped.
3. **Closure**: each tool name the history's assistant turns already called
   that the array lacks, in order of first appearance, with its committed
   schema and description where the schema file exists, and
   ``{"type": "object"}`` otherwise. Vendors expect every name a history
   calls to be defined; these are offered, never permitted.

A schema file that exists but cannot be read, is not valid JSON or is not a
JSON object, and a description file whose frontmatter is malformed, are each
a :class:`ConfigError` naming the tool and the file: surfaced, never dropped.
The files arrive with the repository, so each is read from the workspace's
descriptor without following a symlink, and only where the run's policy lets
it be read (a ``deny_read`` on a credentials file holds here too): a symlink
or a file the policy withholds is a :class:`ConfigError` as well.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from io_harness._confined import PathRefused, Workspace
from io_harness._validation import config_text
from io_harness.errors import ConfigError
from io_harness.messages import Message, ToolSpec
from io_harness.roles._file import name_problem
from io_harness.tools._skills import _frontmatter  # the skills' parser: one frontmatter dialect

__all__ = [
    "DESCRIPTIONS_DIR",
    "SCHEMAS_DIR",
    "STAND_IN_SCHEMA",
    "ComposedTool",
    "Composition",
    "Source",
    "compose",
    "description_path",
    "schema_path",
]

Source = Literal["injected", "elected", "closure"]

SCHEMAS_DIR = Path("descriptions") / "tools"
"""Where a workspace commits tool schemas, ``<name>.json``, relative to the workspace."""
DESCRIPTIONS_DIR = Path("descriptions") / "skills"
"""Where a workspace commits tool descriptions, ``<name>.md``, relative to the workspace."""
STAND_IN_SCHEMA: dict[str, Any] = {"type": "object"}
"""The parameters of a closure tool whose schema the workspace does not commit (copied each use)."""


@dataclass(frozen=True, slots=True)
class ComposedTool:
    """One tool of a composition: what the model is told, by which rule, from which files.

    ``schema_file`` and ``description_file`` are the files an elected or
    closure tool's schema and description were read from; ``None`` for an
    injected tool, for a closure tool's stand-in schema, for a built-in's own
    schema, and for a tool whose description file is absent. ``builtin`` is
    true for an elected tool whose schema is the harness's built-in's (the
    workspace commits none for it).
    """

    spec: ToolSpec
    source: Source
    schema_file: Path | None = None
    description_file: Path | None = None
    builtin: bool = False


@dataclass(frozen=True, slots=True)
class Composition:
    """A role's composed toolset, in the order the model is offered it."""

    tools: tuple[ComposedTool, ...]

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        """Every tool's spec, in order: the request's tools array."""
        return tuple(tool.spec for tool in self.tools)

    @property
    def permitted(self) -> frozenset[str]:
        """The names the role may call: the injected and elected tools, never closure's."""
        return frozenset(tool.spec.name for tool in self.tools if tool.source != "closure")

    def refusal(self, name: str, role: str) -> str | None:
        """``None`` when ``name`` is permitted; else one sentence naming the role and its set."""
        if name in self.permitted:
            return None
        allowed = [tool.spec.name for tool in self.tools if tool.source != "closure"]
        if not allowed:
            return f"the role {role!r} may call no tools; {name!r} is not one of them"
        return f"the role {role!r} may call only: {', '.join(allowed)}; {name!r} is not one of them"


def schema_path(workspace: Path, name: str) -> Path:
    """Where ``workspace`` commits the schema of tool ``name``."""
    return workspace / SCHEMAS_DIR / f"{name}.json"


def description_path(workspace: Path, name: str) -> Path:
    """Where ``workspace`` commits the description of tool ``name``."""
    return workspace / DESCRIPTIONS_DIR / f"{name}.md"


def compose(
    declared: Sequence[str],
    workspace: Path,
    injected: Sequence[ToolSpec],
    history: Sequence[Message],
    *,
    readable: Callable[[str], bool] | None = None,
    builtins: Sequence[ToolSpec] = (),
) -> Composition:
    """The toolset of a role declaring ``declared`` in ``workspace``, by the three rules.

    ``history`` is read, never changed. ``readable`` says whether the run's
    policy lets a workspace path be read outright. ``builtins`` are the run's
    built-in tools: a declared one the workspace commits no schema for is
    elected with its own. A declared name that is not 1-64 of
    ``[a-zA-Z0-9_-]``, a name declared or injected twice, and every file
    fault the module's docstring lists are :class:`ConfigError`.
    """
    files = _Committed(Workspace(workspace), readable)
    own = {spec.name: spec for spec in builtins}
    tools: list[ComposedTool] = []
    taken: set[str] = set()
    for spec in injected:
        if spec.name in taken:
            raise ConfigError(f"two injected tools are named {spec.name!r}")
        taken.add(spec.name)
        tools.append(ComposedTool(spec, "injected"))
    seen: set[str] = set()
    for name in declared:
        problem = name_problem(name, "tool")
        if problem is not None:
            raise ConfigError(f"declared tools: {problem}")
        if name in seen:
            raise ConfigError(f"declared tools: {name!r} is declared twice")
        seen.add(name)
        if name in taken:  # injection outranks election
            continue
        elected = files.tool(name, "elected")
        if elected is None and name in own:  # the harness holds its own tools' schemas
            elected = files.builtin(own[name])
        if elected is not None:
            taken.add(name)
            tools.append(elected)
    for name in _called(history):
        if name in taken:
            continue
        taken.add(name)
        tools.append(_closure(files, name))
    return Composition(tuple(tools))


def _called(history: Sequence[Message]) -> list[str]:
    """Each tool name the history's assistant turns call, once, in order of first appearance."""
    names: dict[str, None] = {}
    for message in history:
        if message.role == "assistant":
            names.update((call.name, None) for call in message.tool_calls)
    return list(names)


def _closure(files: _Committed, name: str) -> ComposedTool:
    # A name no file could be named after (the model may call anything) gets the stand-in:
    # building a path from it could reach outside descriptions/tools.
    if name_problem(name, "tool") is None:
        committed = files.tool(name, "closure")
        if committed is not None:
            return committed
    spec = ToolSpec(name=name, description="", parameters=dict(STAND_IN_SCHEMA))
    return ComposedTool(spec, "closure")


@dataclass(frozen=True, slots=True)
class _Committed:
    """The files a workspace commits for its tools, read as the repository's files are."""

    workspace: Workspace
    readable: Callable[[str], bool] | None

    def tool(self, name: str, source: Source) -> ComposedTool | None:
        """The tool as the workspace commits it, or ``None`` when it has no schema file."""
        schema_rel = (SCHEMAS_DIR / f"{name}.json").as_posix()
        schema = self._text(schema_rel, name, "schema")
        if schema is None:
            return None
        parameters = _schema(schema, self.workspace.root / schema_rel, name)
        schema_file = self.workspace.root / schema_rel
        described = self.description(name)
        if described is None:
            spec = ToolSpec(name=name, description="", parameters=parameters)
            return ComposedTool(spec, source, schema_file, None)
        description, description_file = described
        spec = ToolSpec(name=name, description=description, parameters=parameters)
        return ComposedTool(spec, source, schema_file, description_file)

    def builtin(self, spec: ToolSpec) -> ComposedTool:
        """A built-in elected with its own schema; its description the committed one, if any
        (a committed file without one leaves the built-in's)."""
        described = self.description(spec.name)
        if described is None or not described[0]:
            return ComposedTool(spec, "elected", builtin=True)
        description, description_file = described
        spec = spec.model_copy(update={"description": description})
        return ComposedTool(spec, "elected", None, description_file, builtin=True)

    def description(self, name: str) -> tuple[str, Path] | None:
        """The committed description of tool ``name`` and its file; ``None`` when absent."""
        description_rel = (DESCRIPTIONS_DIR / f"{name}.md").as_posix()
        text = self._text(description_rel, name, "description")
        if text is None:
            return None
        description_file = self.workspace.root / description_rel
        return _description(text, description_file, name), description_file

    def _text(self, rel: str, name: str, what: str) -> str | None:
        """The UTF-8 text of the committed file ``rel``; ``None`` when nothing is there.

        Anything but a regular file reached through real folders (a symlink,
        a folder) is a :class:`ConfigError`, as is a file the policy withholds.
        """
        shown = f"tool {name!r}: {what} file {self.workspace.root / rel}"
        try:
            if self.workspace.lstat(rel) is None:
                return None
            if self.readable is not None and not self.readable(rel):
                raise ConfigError(f"{shown}: the run's policy does not let it be read")
            data = self.workspace.read_bytes(rel)
        except PathRefused as exc:
            raise ConfigError(f"{shown}: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{shown}: {exc.strerror or exc}") from None
        if data is None:
            return None
        return config_text(data, self.workspace.root / rel, f"tool {name!r}: {what} file")


def _schema(text: str, path: Path, name: str) -> dict[str, Any]:
    try:
        schema = json.loads(text, parse_constant=_not_json)
    except ValueError as exc:
        raise ConfigError(f"tool {name!r}: schema file {path} is not valid JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise ConfigError(
            f"tool {name!r}: schema file {path} holds {_json_kind(schema)}, not a JSON object"
        )
    return schema


def _not_json(constant: str) -> Any:
    # json.loads takes NaN and Infinity, which no vendor's JSON parser does.
    raise ValueError(f"{constant} is not JSON")


def _json_kind(value: object) -> str:
    kinds = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")


def _description(text: str, path: Path, name: str) -> str:
    shown = f"tool {name!r}: description file {path}"
    fields, _ = _frontmatter(text.removeprefix("\ufeff"), shown)
    description = fields.get("description")
    if description is None:
        return ""
    if not isinstance(description, str):
        raise ConfigError(
            f"{shown}: the frontmatter's description is a {type(description).__name__}, "
            "not a string"
        )
    return description
