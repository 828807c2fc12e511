"""The single-file-mode tools: read and write the contract's one file, nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from io_harness.tools._base import Args, Tool, ToolOutcome
from io_harness.tools._text import number_lines, read_text, split_lines, write_text

__all__ = ["single_file_tools"]


class _NoArgs(Args):
    pass


class _ContentArgs(Args):
    content: str = Field(description="The whole new content of the file.")


class _ReadTheFile(Tool[_NoArgs]):
    name = "read_file"
    description = "Read the file this task is about; lines come numbered."
    args = _NoArgs

    def __init__(self, path: Path) -> None:
        self.path = path

    async def invoke(self, args: _NoArgs) -> ToolOutcome:
        if not self.path.exists():
            return ToolOutcome(f"{self.path.name} does not exist yet; create it with write_file")
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
