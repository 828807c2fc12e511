"""Confinement to a folder: every act on the agent's behalf walks from the folder's descriptor.

The one rule tools, criteria, skills, isolation and the sandbox share: a path
is checked as text (:func:`parts_of`), then walked one real folder at a time
from the folder's own descriptor, never through a symlink, so what is opened
is what was checked (:class:`Workspace`).
"""

from io_harness._confined._acts import PARTIAL_SUFFIX, PathMissing, Walked, WriteVerb
from io_harness._confined._folder import Folder, Listed
from io_harness._confined._names import (
    MEMORY_PREFIX,
    PathChanged,
    PathRefused,
    parts_of,
    same_name,
)
from io_harness._confined._workspace import SKIPPED_DIRS, Workspace

__all__ = [
    "MEMORY_PREFIX",
    "PARTIAL_SUFFIX",
    "SKIPPED_DIRS",
    "Folder",
    "Listed",
    "PathChanged",
    "PathMissing",
    "PathRefused",
    "Walked",
    "Workspace",
    "WriteVerb",
    "parts_of",
    "same_name",
]
