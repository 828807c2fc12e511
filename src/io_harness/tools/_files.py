"""The workspace-mode file tools: read, write, edit, grep, find, list.

Each acts on every path through :class:`Workspace` on every call, walking from
the root's descriptor without following a symlink, so no call can reach
outside the root. Every cap says what it left out.
"""

from __future__ import annotations

import fnmatch
import json
import re
import time
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from io_harness._confined import Listed
from io_harness._process import in_thread
from io_harness.policy._gate import Access
from io_harness.policy._rules import Act
from io_harness.tools._base import A, Args, HarnessTool, ToolContext, ToolFailure, ToolOutcome
from io_harness.tools._text import (
    READ_CEILING_BYTES,
    change_diff,
    read_numbered,
    read_text,
    split_lines,
    text_of,
    write_reported,
    write_text,
)
from io_harness.tools._workspace import PathMissing, PathRefused, Workspace

__all__ = ["workspace_tools"]

GREP_MAX_MATCHES = 100
GREP_SECONDS = 10.0
"""The most one grep may spend matching: a pattern that backtracks without end is cut off."""
FIND_MAX_RESULTS = 200
LINE_SHOWN_CHARS = 300


def _clip_line(line: str) -> str:
    line = line.rstrip("\r\n")
    if len(line) <= LINE_SHOWN_CHARS:
        return line
    return f"{line[:LINE_SHOWN_CHARS]}... [+{len(line) - LINE_SHOWN_CHARS} chars]"


def _glob_matches(rel: str, glob: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return fnmatch.fnmatchcase(rel, glob) or fnmatch.fnmatchcase(name, glob)


class _InWorkspace(HarnessTool[A]):
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def _on(self, act: Act, path: str) -> Access:
        return Access(act, self.workspace.canonical(path))


class ReadFileArgs(Args):
    path: str = Field(description="File path relative to the workspace root.")
    offset: int | None = Field(None, ge=1, description="First line to read, 1-based.")
    limit: int | None = Field(None, ge=1, description="How many lines to read.")


class ReadFile(_InWorkspace[ReadFileArgs]):
    reads_only = True
    name = "read_file"
    description = (
        "Read a text file; lines come numbered. Give offset and limit to read part of "
        f"a file; a file over {READ_CEILING_BYTES} bytes can only be read in parts."
    )
    args = ReadFileArgs

    def accesses(self, args: ReadFileArgs) -> Sequence[Access]:
        return (self._on(Act.READ, args.path),)

    async def invoke(self, args: ReadFileArgs, context: ToolContext) -> ToolOutcome:
        return ToolOutcome(
            read_numbered(self.workspace, args.path, args.path, args.offset, args.limit)
        )


class WriteFileArgs(Args):
    path: str = Field(description="File path relative to the workspace root.")
    content: str = Field(description="The whole new content of the file.")


class WriteFile(_InWorkspace[WriteFileArgs]):
    name = "write_file"
    description = "Write a whole file, creating it and its folders if needed."
    args = WriteFileArgs

    def accesses(self, args: WriteFileArgs) -> Sequence[Access]:
        return (self._on(Act.WRITE, args.path),)

    def preview(self, args: WriteFileArgs, *, show_current: bool = True) -> str:
        return change_diff(
            self.workspace, args.path, args.path, args.content, show_current=show_current
        )

    async def invoke(self, args: WriteFileArgs, context: ToolContext) -> ToolOutcome:
        return write_reported(self.workspace, args.path, args.content, args.path)


class EditFileArgs(Args):
    path: str = Field(description="File path relative to the workspace root.")
    search: str = Field(description="Exact text to find; it must occur exactly once.")
    replace: str = Field(description="Text to put in its place.")


class EditFile(_InWorkspace[EditFileArgs]):
    name = "edit_file"
    description = (
        "Replace one exact occurrence of `search` with `replace` in a file. "
        "The search text must occur exactly once; include surrounding lines to make it unique."
    )
    args = EditFileArgs

    def accesses(self, args: EditFileArgs) -> Sequence[Access]:
        return (self._on(Act.READ, args.path), self._on(Act.WRITE, args.path))

    def _edited(self, args: EditFileArgs) -> tuple[str, int]:
        if not args.search:
            raise ToolFailure("search is empty; give the exact text to replace")
        text = read_text(
            self.workspace,
            args.path,
            args.path,
            too_large="edit_file cannot edit it; write_file can",
        )
        # Overlapping occurrences count too: "x\nx" occurs twice in "x\nx\nx".
        count = len(re.findall(f"(?={re.escape(args.search)})", text))
        if count != 1:
            where = "not found" if count == 0 else f"found {count} times"
            raise ToolFailure(
                f"the search text was {where} in {args.path}; it must occur exactly once"
            )
        at = text.index(args.search)
        line = text[:at].count("\n") + 1
        return text[:at] + args.replace + text[at + len(args.search) :], line

    def preview(self, args: EditFileArgs, *, show_current: bool = True) -> str:
        if not show_current:
            return (
                f"(the current {args.path} is not shown: the policy does not let it be read)\n"
                f"replace: {args.search!r}\nwith:    {args.replace!r}"
            )
        try:
            edited, _ = self._edited(args)
        except (ToolFailure, PathRefused) as exc:
            return f"(the edit will fail: {exc})"
        return change_diff(self.workspace, args.path, args.path, edited)

    async def invoke(self, args: EditFileArgs, context: ToolContext) -> ToolOutcome:
        edited, line = self._edited(args)
        if write_text(self.workspace, args.path, edited) == "unchanged":
            return ToolOutcome(f"{args.path} unchanged: the replacement equals the search text")
        return ToolOutcome(f"{args.path} edited at line {line}", changed=(args.path,))


class GrepArgs(Args):
    pattern: str = Field(description="A Python regular expression, matched per line.")
    path_glob: str | None = Field(
        None, description="Only files whose relative path or name matches this glob."
    )


class Grep(_InWorkspace[GrepArgs]):
    reads_only = True
    name = "grep"
    description = (
        "Search the workspace's text files for a regular expression; prints "
        f"`path:line: text`, at most {GREP_MAX_MATCHES} matches."
    )
    args = GrepArgs

    def accesses(self, args: GrepArgs) -> Sequence[Access]:
        return (Access(Act.READ, "."),)

    def __init__(self, workspace: Workspace, wall_end: float | None = None) -> None:
        super().__init__(workspace)
        self.wall_end = wall_end
        """When the run's wall budget ends (Unix time): a search stops there at the latest."""

    async def invoke(self, args: GrepArgs, context: ToolContext) -> ToolOutcome:
        # The regex module stops a match at a deadline and lets go of the GIL while it
        # matches (re does neither): run on a thread of its own, a pattern that
        # backtracks without end stalls neither this run past its budget nor others.
        import regex as matching

        try:
            pattern = matching.compile(args.pattern)
        except matching.error as exc:
            raise ToolFailure(f"the pattern is not a valid regular expression: {exc}") from None
        deadline = time.time() + GREP_SECONDS
        if self.wall_end is not None:
            deadline = min(deadline, self.wall_end)
        try:
            return await in_thread(lambda: self._search(args, pattern, deadline))
        except TimeoutError:
            raise ToolFailure(
                f"the search was stopped after {GREP_SECONDS:g} s (or at the run's wall "
                "budget): the pattern backtracks too much; simplify it or narrow path_glob"
            ) from None

    def _search(self, args: GrepArgs, pattern: Any, deadline: float) -> ToolOutcome:
        shown: list[str] = []
        hidden = 0
        unreadable = 0
        withheld = 0
        for found in self.workspace.walk():
            rel = found.rel
            if args.path_glob is not None and not _glob_matches(rel, args.path_glob):
                continue
            if not self.workspace.may_read(rel):
                withheld += 1
                continue
            try:
                with found.open() as handle:
                    text = text_of(handle, rel)
            except (ToolFailure, PathRefused, OSError):
                unreadable += 1
                continue
            for number, line in enumerate(split_lines(text), start=1):
                left = max(deadline - time.time(), 0.001)
                if pattern.search(line, timeout=left, concurrent=True):
                    if len(shown) < GREP_MAX_MATCHES:
                        shown.append(f"{shown_name(rel)}:{number}: {_clip_line(line)}")
                    else:
                        hidden += 1
        notes = []
        if hidden:
            notes.append(f"[{hidden} more matches not shown; narrow the pattern or path_glob]")
        if unreadable:
            notes.append(f"[{unreadable} binary, non-UTF-8 or oversized files not searched]")
        if withheld:
            notes.append(f"[{withheld} files not searched: the policy does not let you read them]")
        if not shown:
            return ToolOutcome("\n".join([f"no matches for {args.pattern!r}", *notes]))
        return ToolOutcome("\n".join(shown + notes))


class FindArgs(Args):
    name_glob: str = Field(
        description="Glob matched against each file's name, or its relative path if it has '/'."
    )


class Find(_InWorkspace[FindArgs]):
    reads_only = True
    name = "find"
    description = f"List files whose name matches a glob, at most {FIND_MAX_RESULTS}."
    args = FindArgs

    def accesses(self, args: FindArgs) -> Sequence[Access]:
        return (Access(Act.READ, "."),)

    async def invoke(self, args: FindArgs, context: ToolContext) -> ToolOutcome:
        found = [
            rel
            for rel in (found.rel for found in self.workspace.walk())
            if _glob_matches(rel, args.name_glob)
        ]
        if not found:
            return ToolOutcome(f"no files match {args.name_glob!r}")
        lines = [shown_name(rel) for rel in found[:FIND_MAX_RESULTS]]
        if len(found) > FIND_MAX_RESULTS:
            lines.append(f"[{len(found) - FIND_MAX_RESULTS} more files not shown]")
        return ToolOutcome("\n".join(lines))


class ListDirArgs(Args):
    path: str = Field(".", description="Folder relative to the workspace root.")


class ListDir(_InWorkspace[ListDirArgs]):
    reads_only = True
    name = "list_dir"
    description = "List one folder: each entry's kind, name and size."
    args = ListDirArgs

    def accesses(self, args: ListDirArgs) -> Sequence[Access]:
        return (self._on(Act.READ, args.path or "."),)

    async def invoke(self, args: ListDirArgs, context: ToolContext) -> ToolOutcome:
        folder = args.path or "."
        try:
            entries = self.workspace.entries(folder)
        except PathMissing:
            raise ToolFailure(f"{args.path} is not a folder: nothing is there") from None
        lines = []
        for entry in entries:
            name = shown_name(entry.name)
            if entry.kind == "link":
                lines.append(f"link  {name} -> {shown_name(self._link_shown(folder, entry))}")
            elif entry.kind == "dir":
                lines.append(f"dir   {name}/")
            else:
                lines.append(f"file  {name}  {entry.size} bytes")
        if not lines:
            return ToolOutcome(f"{args.path} is empty")
        return ToolOutcome("\n".join(lines))

    def _link_shown(self, folder: str, entry: Listed) -> str:
        """Where a listed symlink points, as a path in the workspace; never followed."""
        inside = self.workspace.link_target(f"{folder}/{entry.name}", entry.link or "")
        return "(outside the workspace)" if inside is None else inside


_AMBIGUOUS = re.compile(r'[\x00-\x1f\x7f:"\\]|^\s|\s$')
"""What makes a name in a listing ambiguous: a line break (two entries), ``:`` (a forged
``path:line:`` match), a quote or backslash (a forged quoted name), edge whitespace."""


def shown_name(name: str) -> str:
    """A file name as a listing shows it: as it is, or as a JSON string when it holds
    anything that could make the listing read otherwise (``"evil\\nname.txt"``)."""
    return json.dumps(name, ensure_ascii=False) if _AMBIGUOUS.search(name) else name


def workspace_tools(workspace: Workspace, wall_end: float | None = None) -> list[HarnessTool[Any]]:
    """The built-in tools of a workspace-mode run, in the order the model sees them.

    ``wall_end`` is when the run's wall budget ends, which a search does not outlast.
    """
    return [
        ReadFile(workspace),
        WriteFile(workspace),
        EditFile(workspace),
        Grep(workspace, wall_end),
        Find(workspace),
        ListDir(workspace),
    ]
