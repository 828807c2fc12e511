"""Helpers shared by the tests and by the worker scripts they start.

Import it as ``support`` (``from support import contract``): pytest puts this
folder on ``sys.path`` for the tests, and a worker started as ``python
tests/x_worker.py`` has its own folder there. Only what two or more files need
lives here; what one file needs stays in that file.
"""

from __future__ import annotations

import asyncio
import os
import re
import select
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, TypedDict, Unpack

from io_harness import (
    Budget,
    CompletionRequest,
    CompletionResponse,
    Policy,
    Store,
    TaskContract,
    ToolCall,
    Usage,
    WorkspaceFileContains,
)
from io_harness.testing import ScriptedProvider, call, reply
from io_harness.tools import RunTools, ToolOutcome
from io_harness.tools._gated import Deferral
from io_harness.verify import Criterion

# -- contracts --------------------------------------------------------------------------------


class Limits(TypedDict, total=False):
    """The fields of :class:`~io_harness.Budget`, each optional: what is not given is
    Budget's own default."""

    max_steps: int
    max_wall_seconds: float
    max_tokens: int
    max_retries: int
    max_cost: Decimal | int


def contract(
    root: Path,
    *,
    goal: str = "write done.txt",
    file: str = "done.txt",
    needle: str = "done",
    verify: Criterion | None = None,
    tools: Sequence[str] = (),
    skills: Path | None = None,
    role: str | None = None,
    **budget: Unpack[Limits],
) -> TaskContract:
    """A workspace contract on ``root``: ``goal``, done when ``file`` holds ``needle``.

    ``verify`` replaces that criterion with another; ``tools``, ``skills`` and
    ``role`` are the contract's own; the other keywords are the budget's limits
    (``max_steps=3``). A test file whose task is always the same binds its
    goal, criterion and limits once with :func:`functools.partial`.
    """
    return TaskContract.workspace(
        goal,
        root,
        verify if verify is not None else WorkspaceFileContains(file, needle),
        budget=Budget(**budget),
        tools=tools,
        skills=skills,
        role=role,
    )


# -- what a scripted model says, in a tree of agents ------------------------------------------

USAGE = Usage(input_tokens=100, output_tokens=10)
"""The usage of each scripted turn of :func:`child`, and of the tree tests' other turns."""


def goal_of(request: CompletionRequest) -> str:
    """The goal of the agent that sent ``request``: its first message, up to a blank line."""
    return str(request.messages[0].text).split("\n\n", 1)[0]


def write(path: str, text: str = "done\n") -> ToolCall:
    """A ``write_file`` call putting ``text`` in ``path``."""
    return call("write_file", path=path, content=text)


def spawn(goal: str, file: str, needle: str = "done", **options: Any) -> ToolCall:
    """A ``spawn_agent`` call for a child with ``goal``, done when ``file`` holds ``needle``."""
    verify = {"kind": "workspace_file_contains", "file": file, "needle": needle}
    return call("spawn_agent", goal=goal, verify=verify, **options)


def child(file: str, text: str = "done\n") -> list[CompletionResponse]:
    """A child's script: it writes its file (which passes its check), then says so."""
    return [reply(f"writing {file}", [write(file, text)], USAGE), reply("written", usage=USAGE)]


# -- what a tool call or a run gave -----------------------------------------------------------


async def call_tool(box: RunTools, name: str, /, **arguments: Any) -> ToolOutcome:
    """Dispatch one call of ``name`` with ``arguments`` through ``box``; its outcome."""
    done = await box.dispatch(ToolCall(id="1", name=name, arguments=arguments))
    assert isinstance(done, ToolOutcome)
    return done


def observation(provider: ScriptedProvider, request: int = 1, index: int = 0) -> str:
    """The tool result number ``index`` that the model read in request number ``request``
    (both 0-based)."""
    block = provider.requests[request].messages[-1].content[index]
    return str(block.content)  # type: ignore[union-attr]


def observations(provider: ScriptedProvider, request: int) -> list[str]:
    """Every tool result the model read in request number ``request`` (0-based)."""
    last = provider.requests[request].messages[-1]
    return [str(block.content) for block in last.content]  # type: ignore[union-attr]


def run_id_in(output: str) -> str:
    """The run id in the ``ioh show RUN_ID`` that ``ioh`` printed."""
    found = re.search(r"ioh show (\S+)", output)
    assert found, output
    return found.group(1)


class ProcessDied(BaseException):
    """Stands for the process ending mid-step: nothing of the step is committed."""


# -- policies ---------------------------------------------------------------------------------


def app_policy() -> Policy:
    """Guarded, with an ``app`` layer: read anything, write under src/, never touch
    secrets/, ask before running python."""
    return (
        Policy.guarded()
        .layer("app")
        .allow_read("*")
        .allow_write("src/*")
        .deny_read("secrets/*")
        .deny_write("secrets/*")
        .ask_exec("python")
    )


# -- what a model writes to fool a terminal ---------------------------------------------------

HOSTILE = "\x1b[2K\r\x1b]0;ok\x07\x9b1A\x9d0;ok\x07\u202etxt.exe\u2066\u2069\u200b\u2028"
"""What a model writes to redraw a prompt: erase the line and go back to its start (ESC [2K,
CR), retitle the window (OSC), a C1 CSI and OSC, a right-to-left override and an isolate, a
zero-width space and a line separator."""
HOSTILE_SHOWN = (
    "\\x1b[2K\\r\\x1b]0;ok\\x07\\x9b1A\\x9d0;ok\\x07\\u202etxt.exe\\u2066\\u2069\\u200b\\u2028"
)
""":data:`HOSTILE` as the prompt shows it: every character escaped, none dropped."""
ACTIVE = ["\x1b", "\x07", "\r", "\x9b", "\x9d", "\u202e", "\u2066", "\u2069", "\u200b", "\u2028"]
"""The characters of :data:`HOSTILE` that a terminal acts on or hides."""


def active_in(shown: str | bytes) -> list[str]:
    """The characters of :data:`ACTIVE` in ``shown`` (text is taken as the UTF-8 a terminal
    gets)."""
    sent = shown.encode() if isinstance(shown, str) else shown
    return [char for char in ACTIVE if char.encode() in sent]


# -- waiting ----------------------------------------------------------------------------------


def eventually(condition: Callable[[], object], *, within: float = 60.0) -> bool:
    """Wait for ``condition`` (checked every 50 ms) for up to ``within`` seconds; whether it
    came true."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# -- a worker that dies on cue ----------------------------------------------------------------


class Killer:
    """Counts moments (``call``, ``tool``, ``commit``, ...); SIGKILLs the process at the
    ``count``-th ``kill_at``."""

    def __init__(self, kill_at: str, count: int) -> None:
        self.kill_at, self.count, self.seen = kill_at, count, 0

    def tick(self, moment: str) -> None:
        """Count ``moment``; die if it is the chosen one."""
        if moment == self.kill_at:
            self.seen += 1
            if self.seen == self.count:
                os.kill(os.getpid(), signal.SIGKILL)


def arm(killer: Killer, store: Store, **moments: str) -> None:
    """Make ``killer`` tick ``tool`` just after each tool call returns, and just after each
    call of a store method named in ``moments`` (``commit_step="commit"``) the moment given."""
    dispatch = RunTools.dispatch

    async def dispatch_then_tick(
        self: RunTools, call: ToolCall, **options: Any
    ) -> ToolOutcome | Deferral:
        outcome = await dispatch(self, call, **options)
        killer.tick("tool")
        return outcome

    RunTools.dispatch = dispatch_then_tick  # type: ignore[method-assign]
    for method, moment in moments.items():
        original = getattr(store, method)

        def ticking(*args: Any, _original: Any = original, _moment: str = moment) -> None:
            _original(*args)
            killer.tick(_moment)

        setattr(store, method, ticking)


# -- sockets and wires ------------------------------------------------------------------------


class Listener:
    """A TCP listener (the tests start it on 127.0.0.1, and on ::1 at the same port where the
    machine has IPv6) that counts the connections it accepts and closes each at once."""

    def __init__(self) -> None:
        self.port = 0
        self.accepted = 0

    def accept(self, _reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Count the connection and close it."""
        self.accepted += 1
        writer.close()


def pieces(text: str, size: int) -> list[str]:
    """``text`` cut into consecutive pieces of at most ``size`` characters (none for ``""``)."""
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def line_from(process: subprocess.Popen[str], within: float = 60.0) -> str:
    """The next line ``process`` prints on its standard output, waiting at most ``within``
    seconds (a child that hangs before it prints fails the test instead of hanging it)."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], within)
    if not ready:
        raise AssertionError(f"the process printed no line within {within:g} s")
    return process.stdout.readline()
