"""``ioh roles check [DIR] [--roles FILE]``: each role of a roles file and its composed toolset.

The roles file (default ``DIR/roles.toml``) is loaded, and each role's
declared tools are composed against the workspace ``DIR`` as a first turn
would be: nothing injected, no history. So every tool shown is elected, with
the files its schema and description came from, and the declared names the
workspace commits no schema for are listed as dropped. What a harness would
inject, and which tool answers each elected name, is a run's to know; the
output says so. A fault in the roles file or a committed file is a
:class:`ConfigError`, which the CLI prints as one line (exit status 2).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from io_harness.cli._text import escape
from io_harness.roles import SCHEMAS_DIR, ComposedTool, Role, Roles, compose
from io_harness.tools._names import BUILTIN_TOOL_NAMES

__all__ = ["RUN_TIME_NOTE", "cmd_roles_check", "role_lines"]

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


def cmd_roles_check(args: argparse.Namespace, console: Console) -> int:
    """Load the roles file and print each role's provider, prompt and composed toolset."""
    workspace: Path = args.dir
    path: Path = args.roles if args.roles is not None else workspace / ROLES_FILE
    roles = Roles.from_toml(path)
    # Every role is composed before anything prints: a fault is the command's one line.
    lines = [line for name in roles for line in role_lines(roles.get(name), workspace)]
    console.print(
        f"roles file {escape(str(path))}: {len(roles)} role{'' if len(roles) == 1 else 's'}; "
        f"workspace {escape(str(workspace))}",
        soft_wrap=True,
    )
    for line in lines:
        console.print(line, soft_wrap=True)
    console.print(RUN_TIME_NOTE, soft_wrap=True)
    return 0


def role_lines(role: Role, workspace: Path) -> list[str]:
    """The lines (rich markup) describing ``role`` and its toolset composed in ``workspace``."""
    composition = compose(role.tools, workspace, injected=(), history=())
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
    answered = "" if tool.spec.name in BUILTIN_TOOL_NAMES else "  (not built in)"
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
