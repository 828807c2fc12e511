"""The harness's own tools as a role declares them: their schemas are the host's.

A run hands its built-ins to the composition from its own tools; ``ioh roles
check``, which has no run, asks here for those a workspace-mode run offers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from io_harness._confined import Workspace
from io_harness.contract import OPTIONAL_TOOLS
from io_harness.messages import ToolSpec
from io_harness.tools import ExecTool, workspace_tools

__all__ = ["workspace_builtins"]


def workspace_builtins(
    workspace: Path, optional: Sequence[str] = OPTIONAL_TOOLS
) -> tuple[ToolSpec, ...]:
    """The specs of a workspace-mode run's built-in tools: the file tools, then ``exec``
    when ``optional`` (a contract's ``tools``) names it."""
    folder = Workspace(workspace)
    tools = workspace_tools(folder)
    if "exec" in optional:
        tools.append(ExecTool(folder, None))
    return tuple(tool.spec for tool in tools)
