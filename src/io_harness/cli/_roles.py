"""``ioh roles check [DIR | --contract FILE] [--roles FILE]``: each role of a roles file and
its composed toolset.

``DIR`` is the workspace (``--contract``: the contract's root, the roles file
beside it by default, as ``ioh run`` has them; neither: the current folder),
and the first line says which folder was used and why. The roles file
(default ``DIR/roles.toml``) is loaded, and each role's
declared tools are composed against the workspace ``DIR`` as a first turn
would be: nothing injected, no history, the built-ins a workspace-mode run
has (``exec`` marked as the contract's to add). So every tool shown is
elected, with the files its schema and description came from (or the
built-in's own), and the declared names nothing answers are listed as
dropped. What a harness would inject, and which tool answers each other
elected name, is a run's to know; the output says so. A role that may call
nothing is said so and makes the exit status 1, since a run of it is
refused. A fault in the roles file or a committed file is a
:class:`ConfigError`, which the CLI prints as one line (exit status 2).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from io_harness.cli._scope import scope_of
from io_harness.cli._text import escape
from io_harness.contract import OPTIONAL_TOOLS
from io_harness.messages import ToolSpec
from io_harness.roles import (
    SCHEMAS_DIR,
    ComposedTool,
    Composition,
    Role,
    Roles,
    compose,
    no_tools,
    workspace_builtins,
)
from io_harness.tools._names import BUILTIN_TOOL_NAMES

__all__ = ["RUN_TIME_NOTE", "cmd_roles_check", "first_turn", "role_lines"]

ROLES_FILE = "roles.toml"
"""The roles file ``ioh roles check`` reads when ``--roles`` is not given."""
RUN_TIME_NOTE = (
    "At run time the built-in tools, the caller's tools and MCP tools answer elected "
    "names; a name marked (not built in) needs a caller's or MCP tool of that name, and "
    "a call to a name nothing answers is refused in-band."
)
"""Said once: what this command cannot know, and who checks it."""
HARNESS_PROVIDER = "the harness's"
"""What a role without a provider runs on."""
NOTHING_TO_CALL = (
    "a run of this role is refused before its first model call, unless its harness "
    "injects tools (the caller's, or read_skill, remember, forget, spawn_agent)"
)
"""Said under a role that may call nothing: what a run of it meets."""


def cmd_roles_check(args: argparse.Namespace, console: Console) -> int:
    """Load the roles file and print each role's provider, prompt and composed toolset."""
    scope = scope_of(args.dir, args.contract, "DIR")
    workspace = scope.folder
    beside = scope.contract.parent if scope.contract is not None else workspace  # as ioh run
    path: Path = args.roles if args.roles is not None else beside / ROLES_FILE
    roles = Roles.from_toml(path)
    builtins = workspace_builtins(workspace)
    # Every role is composed before anything prints: a fault is the command's one line.
    composed = {name: first_turn(roles.get(name), workspace, builtins) for name in roles}
    lines = [
        line for name in roles for line in role_lines(roles.get(name), workspace, composed[name])
    ]
    console.print(
        f"roles file {escape(str(path))}: {len(roles)} role{'' if len(roles) == 1 else 's'}; "
        f"workspace {escape(str(workspace))} ({escape(scope.why)})",
        soft_wrap=True,
    )
    for line in lines:
        console.print(line, soft_wrap=True)
    console.print(RUN_TIME_NOTE, soft_wrap=True)
    # A role that may call nothing is not a fault of a file, but a run of it is refused.
    return 0 if all(composition.permitted for composition in composed.values()) else 1


def first_turn(
    role: Role, workspace: Path, builtins: Sequence[ToolSpec] | None = None
) -> Composition:
    """``role`` composed in ``workspace`` as at a first turn: nothing injected, ``builtins``
    (by default a workspace-mode run's) elected by their own schemas when declared."""
    if builtins is None:
        builtins = workspace_builtins(workspace)
    return compose(role.tools, workspace, injected=(), history=(), builtins=builtins)


def role_lines(role: Role, workspace: Path, composition: Composition | None = None) -> list[str]:
    """The lines (rich markup) describing ``role`` and its toolset (by default composed by
    :func:`first_turn`) in ``workspace``."""
    if composition is None:
        composition = first_turn(role, workspace)
    lines = [
        f"[bold]{escape(role.name)}[/]",
        f"  provider: {escape(role.provider) if role.provider else HARNESS_PROVIDER}",
        f"  system prompt: {_prompt(role, workspace)}",
    ]
    if role.context_window is not None:
        lines.append(f"  context window: {role.context_window} tokens")
    count = len(composition.tools)
    lines.append(f"  tools ({count}):" if count else "  tools: none")
    lines.extend(f"    {_tool(tool, workspace)}" for tool in composition.tools)
    composed = {tool.spec.name for tool in composition.tools}
    dropped = [name for name in role.tools if name not in composed]
    if dropped:
        lines.append(
            f"  dropped (no schema in {escape(SCHEMAS_DIR.as_posix())}/): "
            + ", ".join(escape(name) for name in dropped)
        )
    if not count:
        lines.append(f"  [bold]{escape(no_tools(role, workspace))}[/]: {NOTHING_TO_CALL}")
    return lines


def _prompt(role: Role, workspace: Path) -> str:
    if role.system_prompt_file is not None:
        return escape(_shown(role.system_prompt_file, workspace))
    if role.system_prompt is not None:
        return "given in Python"
    return "none (the harness's)"


def _tool(tool: ComposedTool, workspace: Path) -> str:
    schema = _shown(tool.schema_file, workspace) if tool.schema_file else "no schema file"
    description = (
        _shown(tool.description_file, workspace) if tool.description_file else "no description"
    )
    if tool.builtin:
        schema = "built-in schema"
        description = description if tool.description_file else "built-in description"
    answered = "" if tool.spec.name in BUILTIN_TOOL_NAMES else "  (not built in)"
    if tool.builtin and tool.spec.name in OPTIONAL_TOOLS:
        answered = "  (when the contract's tools include it)"
    return (
        f"{escape(tool.spec.name)}  {tool.source}  {escape(schema)}  {escape(description)}"
        f"{answered}"
    )


def _shown(path: Path, workspace: Path) -> str:
    """``path`` relative to the workspace when it lies there, as given otherwise."""
    try:
        return path.absolute().relative_to(workspace.absolute()).as_posix()
    except ValueError:
        return str(path)
