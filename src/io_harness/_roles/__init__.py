"""Roles: named agents' provider, system prompt and declared tools, and their composed toolsets.

:class:`Roles` loads a roles file (``_file.py``); :func:`compose` builds the
tools array a role's agent is offered from the injected tools, the declared
names the workspace commits schemas for, and the names the history already
calls (``_compose.py``).
"""

from io_harness._roles._compose import (
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
from io_harness._roles._file import ROLE_KEYS, Role, Roles

__all__ = [
    "DESCRIPTIONS_DIR",
    "ROLE_KEYS",
    "SCHEMAS_DIR",
    "STAND_IN_SCHEMA",
    "ComposedTool",
    "Composition",
    "Role",
    "Roles",
    "Source",
    "compose",
    "description_path",
    "schema_path",
]
