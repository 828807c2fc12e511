"""Effects exactly once: a step redone after a crash re-observes what its calls already did.

A step whose answer calls anything that acts (writes a file, runs a command,
calls a caller's or MCP tool, spawns) is journaled before its calls run, and
before each such call acts its *intent* is stored with the journal: the
calls done so far, and what the files it writes hold now. A step redone
from the journal skips the calls it finished and, for the call that was
acting when the process died, compares the files with the intent: changed,
the call took effect and is not repeated (an edit whose replacement holds
its search text is not applied twice); unchanged, it runs. A call whose
effect cannot be seen from files (a command, a caller's or MCP tool) is
reported and not repeated; spawns and memory writes are repeatable, and run.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from io_harness._confined import MEMORY_PREFIX, PathRefused, Workspace
from io_harness.loop._progress import Intent
from io_harness.messages import ToolCall
from io_harness.policy._rules import Act
from io_harness.tools import RunTools
from io_harness.tools._base import ToolOutcome

__all__ = ["FILE_TOOLS", "acts_on_the_world", "intent_for", "taken_effect"]

FILE_TOOLS = frozenset({"write_file", "edit_file"})
"""The calls whose effect shows in their files: an intent tells whether they took effect."""
_REPEATABLE = frozenset({"spawn_agent", "remember", "forget"})
"""Calls that find what they did before (a spawn its child) or set a value again."""


def acts_on_the_world(tools: RunTools, call: ToolCall) -> bool:
    """Whether ``call`` may do more than read: any tool of the run but a read-only one (a call
    of no tool, or with bad arguments, will be refused: journaling it costs only a commit)."""
    return call.name in tools.names and not tools[call.name].reads_only


def intent_for(tools: RunTools, call: ToolCall, root: Path) -> Intent:
    """The intent of ``call``: the files it writes, with what they hold now."""
    files = {
        access.target: _digest(root, access.target)
        for access in tools.acts(call) or ()
        if access.act is Act.WRITE and not access.target.startswith(MEMORY_PREFIX)
    }
    return Intent(call_id=call.id, files=files)


def taken_effect(intent: Intent, call: ToolCall, root: Path) -> ToolOutcome | None:
    """What to report for the call ``intent`` was stored for; ``None``: run it.

    A file tool whose files changed since took effect; one whose files did not
    never acted. A repeatable call runs again. Any other call is reported as
    interrupted, not repeated.
    """
    if call.name in _REPEATABLE:
        return None
    if call.name in FILE_TOOLS:  # no files: its arguments were bad, and will be again
        changed = tuple(t for t, held in intent.files.items() if _digest(root, t) != held)
        if not changed:
            return None
        return ToolOutcome(
            f"{call.name}: {', '.join(changed)} already changed by this call before the harness "
            "stopped; it was not applied again",
            changed=changed,
        )
    return ToolOutcome(
        f"{call.name}: this call was acting when the harness stopped, so whether it took "
        "effect is not known; it was not repeated. Check its effects before doing it again.",
        is_error=True,
    )


def _digest(root: Path, target: str) -> str:
    """The sha256 of the bytes of the file at the write's ``target``; ``""`` when there is none.

    The file is opened from its folder's descriptor, never through a symlink
    (an absolute target is a single-file run's file, named where it really is).
    """
    path = Path(target)
    folder, name = (
        (Workspace(path.parent), path.name) if path.is_absolute() else (Workspace(root), target)
    )
    try:
        with folder.open(name) as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except (PathRefused, FileNotFoundError, NotADirectoryError):
        return ""
