"""The tools' name for the workspace confinement of ``io_harness._paths``."""

from io_harness._paths import SKIPPED_DIRS, PathRefused, Workspace

__all__ = ["SKIPPED_DIRS", "PathRefused", "Workspace"]
