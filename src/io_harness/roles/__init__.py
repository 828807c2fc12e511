"""Roles: named agents' provider, system prompt and declared tools, and their composed toolsets.

:class:`Roles` loads a roles file (``_file.py``); :func:`compose` builds the
tools array a role's agent is offered from the injected tools, the declared
names the workspace commits schemas for or the run has built in, and the names
the history already calls (``_compose.py``); :class:`RunRole` is a run's role, its
tools composed anew for every model call and its calls limited to what it declared
(``_run.py``); :func:`workspace_builtins` the built-ins a workspace-mode run
offers, for a composition without a run (``_builtins.py``).
"""

from io_harness.roles._builtins import workspace_builtins
from io_harness.roles._compose import (
    DESCRIPTIONS_DIR,
    SCHEMAS_DIR,
    STAND_IN_SCHEMA,
    ComposedTool,
    Composition,
    Source,
    compose,
    description_path,
    schema_path,
)
from io_harness.roles._file import ROLE_KEYS, Role, Roles
from io_harness.roles._run import PROCEDURE_TOOLS, RunRole, no_tools

__all__ = [
    "DESCRIPTIONS_DIR",
    "PROCEDURE_TOOLS",
    "ROLE_KEYS",
    "SCHEMAS_DIR",
    "STAND_IN_SCHEMA",
    "ComposedTool",
    "Composition",
    "Role",
    "Roles",
    "RunRole",
    "Source",
    "compose",
    "description_path",
    "no_tools",
    "schema_path",
    "workspace_builtins",
]
