"""The single-file-mode tools: read and write the contract's one file, nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from io_harness.tools._base import Args, Tool, ToolOutcome
from io_harness.tools._text import (
    READ_CEILING_BYTES,
    number_lines,
    read_text,
    read_window,
    split_lines,
    write_text,
)

__all__ = ["single_file_tools"]


class _ReadArgs(Args):
    offset: int | None = Field(None, ge=1, description="First line to read, 1-based.")
    limit: int | None = Field(None, ge=1, description="How many lines to read.")


class _ContentArgs(Args):
    content: str = Field(description="The whole new content of the file.")


class _ReadTheFile(Tool[_ReadArgs]):
    name = "read_file"
    description = (
        "Read the file this task is about; lines come numbered. Give offset and limit "
        f"to read part of it; a file over {READ_CEILING_BYTES} bytes can only be read in parts."
    )
    args = _ReadArgs

    def __init__(self, path: Path) -> None:
        self.path = path

    async def invoke(self, args: _ReadArgs) -> ToolOutcome:
        if not self.path.exists():
            return ToolOutcome(f"{self.path.name} does not exist yet; create it with write_file")
        if args.offset is not None or args.limit is not None:
            return ToolOutcome(read_window(self.path, self.path.name, args.offset or 1, args.limit))
        text = read_text(self.path, self.path.name)
        if not text:
            return ToolOutcome(f"{self.path.name} is empty")
        return ToolOutcome(number_lines(split_lines(text), 1))


class _WriteTheFile(Tool[_ContentArgs]):
    name = "write_file"
    description = "Replace the whole content of the file this task is about."
    args = _ContentArgs

    def __init__(self, path: Path) -> None:
        self.path = path

    async def invoke(self, args: _ContentArgs) -> ToolOutcome:
        verb = write_text(self.path, args.content, self.path.name)
        size = len(args.content.encode("utf-8"))
        changed = () if verb == "unchanged" else (self.path.name,)
        return ToolOutcome(f"{self.path.name} {verb} ({size} bytes)", changed=changed)


def single_file_tools(path: Path) -> list[Tool[Any]]:
    """The two tools of a single-file run."""
    return [_ReadTheFile(path), _WriteTheFile(path)]
