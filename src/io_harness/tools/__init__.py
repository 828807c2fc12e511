"""Tools the model can call, and the box that dispatches its calls.

Every failure inside a tool (a refused path, a missing file, bad arguments)
becomes an error observation the model reads; :meth:`RunTools.dispatch`
never raises.
"""

from io_harness.tools._base import Args, HarnessTool, ToolContext, ToolFailure, ToolOutcome
from io_harness.tools._caller import Tool, Toolbox
from io_harness.tools._exec import ExecTool
from io_harness.tools._files import workspace_tools
from io_harness.tools._function import FunctionTool, ToolArgumentsError, tool
from io_harness.tools._run_tools import RunTools
from io_harness.tools._single import TheFile, single_file_tools
from io_harness.tools._workspace import SKIPPED_DIRS, PathRefused, Workspace

__all__ = [
    "SKIPPED_DIRS",
    "Args",
    "ExecTool",
    "FunctionTool",
    "HarnessTool",
    "PathRefused",
    "RunTools",
    "TheFile",
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolFailure",
    "ToolOutcome",
    "Toolbox",
    "Workspace",
    "single_file_tools",
    "tool",
    "workspace_tools",
]
