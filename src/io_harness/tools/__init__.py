"""Tools the model can call, and the box that dispatches its calls.

Every failure inside a tool (a refused path, a missing file, bad arguments)
becomes an error observation the model reads; :meth:`Toolbox.dispatch`
never raises.
"""

from io_harness.tools._base import Args, Tool, ToolFailure, ToolOutcome
from io_harness.tools._exec import ExecTool
from io_harness.tools._files import workspace_tools
from io_harness.tools._single import single_file_tools
from io_harness.tools._toolbox import Toolbox
from io_harness.tools._workspace import SKIPPED_DIRS, PathRefused, Workspace

__all__ = [
    "SKIPPED_DIRS",
    "Args",
    "ExecTool",
    "PathRefused",
    "Tool",
    "ToolFailure",
    "ToolOutcome",
    "Toolbox",
    "Workspace",
    "single_file_tools",
    "workspace_tools",
]
