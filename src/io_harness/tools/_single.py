"""The single-file-mode tools: read and write the contract's one file, nothing else."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from io_harness.policy._gate import Access
from io_harness.policy._rules import Act
from io_harness.tools._base import Args, HarnessTool, ToolOutcome
from io_harness.tools._text import READ_CEILING_BYTES, change_diff, read_numbered, write_reported

__all__ = ["single_file_tools"]


class _ReadArgs(Args):
    offset: int | None = Field(None, ge=1, description="First line to read, 1-based.")
    limit: int | None = Field(None, ge=1, description="How many lines to read.")


class _ContentArgs(Args):
    content: str = Field(description="The whole new content of the file.")


class _ReadTheFile(HarnessTool[_ReadArgs]):
    reads_only = True
    name = "read_file"
    description = (
        "Read the file this task is about; lines come numbered. Give offset and limit "
        f"to read part of it; a file over {READ_CEILING_BYTES} bytes can only be read in parts."
    )
    args = _ReadArgs

    def __init__(self, path: Path) -> None:
        self.path = path

    def accesses(self, args: _ReadArgs) -> Sequence[Access]:
        return (Access(Act.READ, canonical_name(self.path)),)

    async def invoke(self, args: _ReadArgs) -> ToolOutcome:
        if not self.path.exists():
            return ToolOutcome(f"{self.path.name} does not exist yet; create it with write_file")
        return ToolOutcome(read_numbered(self.path, self.path.name, args.offset, args.limit))


class _WriteTheFile(HarnessTool[_ContentArgs]):
    name = "write_file"
    description = "Replace the whole content of the file this task is about."
    args = _ContentArgs

    def __init__(self, path: Path) -> None:
        self.path = path

    def accesses(self, args: _ContentArgs) -> Sequence[Access]:
        return (Access(Act.WRITE, canonical_name(self.path)),)

    def preview(self, args: _ContentArgs, *, show_current: bool = True) -> str:
        return change_diff(self.path, self.path.name, args.content, show_current=show_current)

    async def invoke(self, args: _ContentArgs) -> ToolOutcome:
        return write_reported(self.path, args.content, self.path.name)


def canonical_name(path: Path) -> str:
    """The file as the policy sees it: where a symlink really leads, relative to the folder.

    A link that leads out of the file's folder is named by its absolute real
    path, so a glob on its name (``.env``, ``id_rsa``) still applies.
    """
    real, folder = path.resolve(), path.parent.resolve()
    return real.relative_to(folder).as_posix() if real.is_relative_to(folder) else str(real)


def single_file_tools(path: Path) -> list[HarnessTool[Any]]:
    """The two tools of a single-file run."""
    return [_ReadTheFile(path), _WriteTheFile(path)]
