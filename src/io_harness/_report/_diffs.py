"""The change each file write or edit of a run made, worked out from its trace alone.

The trace holds what the model sent (a write's whole content, an edit's
search and replace) and what the tool answered (``created``, ``changed``,
``edited at line N``), but not the files. So the content before a change is
known only when the run itself last showed it: a whole-file ``read_file``, or
a write or edit this replay followed. Any other call that may change files
(``exec``, a sub-agent, a caller's or an MCP server's tool) forgets what was
known. Where the earlier content is not known, the change says what can be
said: the edit's hunk at its line, the new content of a rewritten file, or the
diff the approver was shown when the write was asked about.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from io_harness.store import ToolCallTrace

__all__ = ["FileChange", "file_changes"]

_READ_ONLY = frozenset(
    {"read_file", "grep", "find", "list_dir", "read_skill", "remember", "forget"}
)
"""Built-in tools that change no file in the workspace (memory lives in the store)."""
_WRITTEN = re.compile(r"^(?P<path>.+) (?P<verb>created|changed|unchanged) \((?P<size>\d+) bytes\)$")
_EDITED = re.compile(r"^(?P<path>.+) edited at line (?P<line>\d+)$")
_NUMBERED = re.compile(r"^ *(?P<n>\d+)\t")


@dataclass(frozen=True, slots=True)
class FileChange:
    """What one write or edit did to one file, as far as the trace tells."""

    path: str
    verb: str
    """``created``, ``changed``, ``edited`` or ``unchanged``."""
    note: str
    """How the diff was made, or why there is none."""
    diff: str = ""
    """A unified diff (``+``/``-``/``@@`` lines); empty when none can be made."""
    content: str | None = None
    """The whole new content, when there is no diff to show it by."""


@dataclass(frozen=True, slots=True)
class _Known:
    text: str
    where: str
    """Where the replay saw it: ``read at step 2``, ``written at step 3``."""


def file_changes(
    calls: Iterable[ToolCallTrace],
    single_file: str | None = None,
    approved_diffs: Mapping[str, str] | None = None,
) -> dict[tuple[int, int], FileChange]:
    """Each successful write or edit among ``calls`` (in order), by (step, seq).

    ``single_file`` names the file of a single-file run, whose tools take no
    path; ``approved_diffs`` holds, by call id, the diff an approver was shown
    for a write that was asked about.
    """
    known: dict[str, _Known] = {}
    changes: dict[tuple[int, int], FileChange] = {}
    for call in calls:
        if call.kind != "builtin":
            known.clear()
            continue
        if call.name not in {"write_file", "edit_file", *_READ_ONLY}:
            known.clear()  # exec, spawn_agent: any file may have changed
            continue
        if call.is_error:
            continue
        args = _arguments(call)
        path = args.get("path", single_file)
        if not isinstance(path, str):
            continue
        where = f"step {call.step}"
        if call.name == "read_file":
            whole = args.get("offset") is None and args.get("limit") is None
            text = _unnumbered(call.result, path) if whole else None
            if text is not None:
                known[path] = _Known(text, f"read at {where}")
        elif call.name == "write_file":
            change = _write(call, path, args, known, (approved_diffs or {}).get(call.call_id))
            if change is not None:
                changes[(call.step, call.seq)] = change
        elif call.name == "edit_file":
            change = _edit(call, path, args, known)
            if change is not None:
                changes[(call.step, call.seq)] = change
    return changes


def _arguments(call: ToolCallTrace) -> dict[str, Any]:
    try:
        value = call.parsed_arguments
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _unnumbered(result: str, path: str) -> str | None:
    """The file's text from a whole-file ``read_file`` answer, or ``None`` if it is not one."""
    if result == f"{path} is empty":
        return ""
    lines = result.split("\n")
    ends = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    text: list[str] = []
    for expected, line in enumerate(ends, start=1):
        numbered = _NUMBERED.match(line)
        if numbered is None or int(numbered["n"]) != expected:
            return None
        text.append(line[numbered.end() :])
    return "".join(text) if text else None


def _write(
    call: ToolCallTrace,
    path: str,
    args: dict[str, Any],
    known: dict[str, _Known],
    approved_diff: str | None,
) -> FileChange | None:
    answered, content = _WRITTEN.match(call.result), args.get("content")
    if answered is None or not isinstance(content, str):
        known.pop(path, None)
        return None
    verb, before = answered["verb"], known.get(path)
    known[path] = _Known(content, f"written at step {call.step}")
    if verb == "unchanged":
        return FileChange(path, verb, "the file already held this content")
    if verb == "created":
        return FileChange(path, verb, "a new file", _unified("", content, path, new_file=True))
    if before is not None and before.text != content:
        return FileChange(
            path,
            verb,
            f"against its content as {before.where}",
            _unified(before.text, content, path),
        )
    if approved_diff:
        return FileChange(path, verb, "the diff the approver was shown", approved_diff)
    return FileChange(
        path,
        verb,
        "the file existed before this write; its earlier content is not in the trace, "
        "so its new content is shown whole",
        content=content,
    )


def _edit(
    call: ToolCallTrace, path: str, args: dict[str, Any], known: dict[str, _Known]
) -> FileChange | None:
    search, replace = args.get("search"), args.get("replace")
    answered = _EDITED.match(call.result)
    if answered is None or not isinstance(search, str) or not isinstance(replace, str):
        if not call.result.endswith("unchanged: the replacement equals the search text"):
            known.pop(path, None)
            return None
        return FileChange(path, "unchanged", "the replacement equals the search text")
    line = int(answered["line"])
    before = known.get(path)
    if before is not None:
        edited = _replaced_once(before.text, search, replace, line)
        if edited is not None:
            known[path] = _Known(edited, f"edited at step {call.step}")
            diff = _unified(before.text, edited, path)
            return FileChange(path, "edited", f"against its content as {before.where}", diff)
    known.pop(path, None)
    return FileChange(
        path,
        "edited",
        f"the replaced text at line {line}; the rest of the file is not in the trace",
        _hunk(path, line, search, replace),
    )


def _replaced_once(text: str, search: str, replace: str, line: int) -> str | None:
    """``text`` with its one ``search`` replaced, if that is the edit the tool reported."""
    if not search or len(re.findall(f"(?={re.escape(search)})", text)) != 1:
        return None
    at = text.index(search)
    if text[:at].count("\n") + 1 != line:
        return None
    return text[:at] + replace + text[at + len(search) :]


def _unified(old: str, new: str, path: str, *, new_file: bool = False) -> str:
    diff = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile="/dev/null" if new_file else f"a/{path}",
        tofile=f"b/{path}",
    )
    return _ended("".join(diff))


def _hunk(path: str, line: int, search: str, replace: str) -> str:
    old, new = search.splitlines(keepends=True), replace.splitlines(keepends=True)
    lines = [f"--- a/{path}\n", f"+++ b/{path}\n", f"@@ -{line},{len(old)} +{line},{len(new)} @@\n"]
    lines += [f"-{text}" for text in old] + [f"+{text}" for text in new]
    return _ended("".join(_ended(one) for one in lines))


def _ended(text: str) -> str:
    """Each line ended, so a last line without a newline does not run into the next."""
    return text if not text or text.endswith("\n") else text + "\n"
