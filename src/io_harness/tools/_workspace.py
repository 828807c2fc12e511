"""The tools' name for the workspace confinement of ``io_harness._confined``."""

from io_harness._confined import SKIPPED_DIRS, PathChanged, PathMissing, PathRefused, Workspace

__all__ = ["SKIPPED_DIRS", "PathChanged", "PathMissing", "PathRefused", "Workspace"]
