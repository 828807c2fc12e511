"""The single-file-mode tools: read and write the contract's one file, nothing else."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from io_harness._confined import PARTIAL_SUFFIX, PathMissing, Workspace
from io_harness.policy._gate import Access
from io_harness.policy._rules import Act
from io_harness.tools._base import Args, HarnessTool, ToolContext, ToolOutcome
from io_harness.tools._text import READ_CEILING_BYTES, change_diff, read_numbered, write_reported

__all__ = ["TheFile", "single_file_tools"]


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

    def __init__(self, file: TheFile) -> None:
        self.file = file

    def accesses(self, args: _ReadArgs) -> Sequence[Access]:
        return (Access(Act.READ, self.file.target),)

    async def invoke(self, args: _ReadArgs, context: ToolContext) -> ToolOutcome:
        file = self.file
        if file.folder.lstat(file.name) is None:
            return ToolOutcome(f"{file.shown} does not exist yet; create it with write_file")
        return ToolOutcome(
            read_numbered(file.folder, file.name, file.shown, args.offset, args.limit)
        )


class _WriteTheFile(HarnessTool[_ContentArgs]):
    name = "write_file"
    description = "Replace the whole content of the file this task is about."
    args = _ContentArgs

    def __init__(self, file: TheFile) -> None:
        self.file = file

    def accesses(self, args: _ContentArgs) -> Sequence[Access]:
        return (Access(Act.WRITE, self.file.target),)

    def preview(self, args: _ContentArgs, *, show_current: bool = True) -> str:
        file = self.file
        return change_diff(
            file.folder, file.name, file.shown, args.content, show_current=show_current
        )

    async def invoke(self, args: _ContentArgs, context: ToolContext) -> ToolOutcome:
        file = self.file
        return write_reported(file.folder, file.name, args.content, file.shown)


@dataclass(frozen=True, slots=True)
class TheFile:
    """The contract's file: its real folder (confined), its name there, its policy target."""

    folder: Workspace
    name: str
    shown: str
    target: str

    @classmethod
    def of(cls, path: Path) -> TheFile:
        """The file at ``path``, a symlink the contract names resolved once, now.

        The contract is the caller's, so where its path leads is taken as
        given; from then on the file is reached from its folder's descriptor
        and never through a symlink. The policy's target is the file's name,
        or its absolute real path when a link led out of the named folder, so
        a glob on its name (``.env``, ``id_rsa``) still applies.
        """
        real, named_in = path.resolve(), path.parent.resolve()
        target = (
            real.relative_to(named_in).as_posix() if real.is_relative_to(named_in) else str(real)
        )
        return cls(Workspace(real.parent, called="the file's folder"), real.name, path.name, target)

    def remove_partial_writes(self) -> None:
        """Delete the temporary files of this file's writes that a crash interrupted."""
        try:
            entries = self.folder.entries()
        except PathMissing:
            return  # no folder yet, so no write of it was cut short
        for entry in entries:
            if entry.name.startswith(f".{self.name}.") and entry.name.endswith(PARTIAL_SUFFIX):
                self.folder.unlink(entry.name)


def single_file_tools(path: Path) -> list[HarnessTool[Any]]:
    """The two tools of a single-file run on the file at ``path``."""
    file = TheFile.of(path)
    return [_ReadTheFile(file), _WriteTheFile(file)]
