"""The memory tools: ``remember`` and ``forget`` a note that later runs in the workspace see.

Notes live in the store, per workspace (its canonical root). Each call is a
``write`` act on ``memory:<key>``, so a policy can refuse it
(``deny_write("memory:*")``) like a write to a file. A later run starts with
the notes in its first message (:func:`memory_notes`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import ClassVar

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from io_harness.policy._gate import Access
from io_harness.policy._rules import Act, normalise_target
from io_harness.store._base import Store
from io_harness.store._memory import (
    DEFAULT_MEMORY_LIMITS,
    KEY_MAX_CHARS,
    MemoryAuthor,
    MemoryEntry,
    MemoryLimits,
    memory_key_problem,
)
from io_harness.tools._base import Args, HarnessTool, ToolContext, ToolOutcome
from io_harness.tools._names import MEMORY_PREFIX

__all__ = [
    "NOTES_HEADING",
    "ForgetTool",
    "MemoryAuthor",
    "RememberTool",
    "memory_key_refusal",
    "memory_notes",
    "memory_target",
]


NOTES_HEADING = (
    "Notes remembered from earlier runs in this workspace (remember/forget change them):"
)
"""The first line of the notes block (:func:`memory_notes`)."""

_KEY_HELP = (
    f"The note's name: 1-{KEY_MAX_CHARS} characters on one line, e.g. 'test-command' or "
    "'notes/layout' (no '\\' or '//', no '.' or '..' between slashes, no trailing '/'). "
    "Setting a key that exists replaces its value."
)


def memory_target(key: str) -> str:
    """The target a memory key's write is checked on: ``memory:<key>``."""
    return f"{MEMORY_PREFIX}{key}"


def memory_key_refusal(key: str) -> str | None:
    """Why the tools refuse ``key``, or ``None`` when they take it.

    Beyond the store's rule (1-100 characters, not blank, no control
    characters), the key's target ``memory:<key>`` must be what the policy
    matches: rules see targets of ``write`` as paths and normalise them, so a
    key with ``\\``, ``//``, a ``.`` or ``..`` part or a trailing ``/`` would
    be checked under another name (``a/../b`` as ``b``) and could slip past
    ``deny_write("memory:*")``.
    """
    problem = memory_key_problem(key)
    if problem is not None:
        return problem
    target = memory_target(key)
    if normalise_target(Act.WRITE, target) != target:
        return (
            "a key must not contain '\\' or '//', have '.' or '..' between slashes, or end with '/'"
        )
    return None


def _checked_key(key: str) -> str:
    problem = memory_key_refusal(key)
    if problem is not None:
        raise PydanticCustomError("memory_key", "{problem}", {"problem": problem})
    return key


def _value_help(limits: MemoryLimits) -> str:
    return (
        f"The note: at most {limits.value_chars:,} characters (a longer one is refused, "
        f"never cut). Memory holds at most {limits.entries:,} notes and "
        f"{limits.total_chars:,} characters of values in all; past either cap the oldest "
        "notes are forgotten to make room, and the reply names them."
    )


class RememberArgs(Args):
    # No docstring: pydantic would send it to the model as the schema's description.
    limits: ClassVar[MemoryLimits] = DEFAULT_MEMORY_LIMITS

    key: str = Field(description=_KEY_HELP)
    value: str = Field(description=_value_help(DEFAULT_MEMORY_LIMITS))

    @field_validator("key")
    @classmethod
    def _key_taken(cls, key: str) -> str:
        return _checked_key(key)

    @field_validator("value")
    @classmethod
    def _value_fits(cls, value: str) -> str:
        cap = cls.limits.value_chars
        if len(value) > cap:
            raise PydanticCustomError(
                "memory_value_too_long",
                "the value is {length} characters, over the cap of {cap} characters per "
                "value; nothing was remembered: shorten it, or split it over several keys",
                {"length": f"{len(value):,}", "cap": f"{cap:,}"},
            )
        return value


@functools.cache
def _remember_args(limits: MemoryLimits) -> type[RememberArgs]:
    """The arguments of ``remember`` under ``limits``: the cap checked and described."""
    if limits == DEFAULT_MEMORY_LIMITS:
        return RememberArgs
    chosen = limits

    class LimitedRememberArgs(RememberArgs):
        limits: ClassVar[MemoryLimits] = chosen

        value: str = Field(description=_value_help(chosen))

    return LimitedRememberArgs


class ForgetArgs(Args):
    key: str = Field(description="The name of the note to forget.")

    @field_validator("key")
    @classmethod
    def _key_taken(cls, key: str) -> str:
        return _checked_key(key)


def _author(context: ToolContext) -> MemoryAuthor:
    """Who is writing: the run, its step and the tool call the note comes from."""
    return MemoryAuthor(run_id=context.run_id, step=context.step, call_id=context.call_id)


class _MemoryTool:
    def __init__(self, store: Store, workspace: str) -> None:
        self.store = store
        self.workspace = workspace

    def _was(self, key: str, show_current: bool) -> str:
        """The note's current value as an approver is shown it."""
        if not show_current:
            return "(not shown: the policy does not let it be read)"
        entries = self.store.memory_entries(self.workspace)
        was = next((entry.value for entry in entries if entry.key == key), None)
        return "(not set)" if was is None else repr(was)


class RememberTool(_MemoryTool, HarnessTool[RememberArgs]):
    """``remember {key, value}``: set a note that later runs in the workspace start with.

    ``store`` keeps the notes of ``workspace`` (its canonical root, a resolved
    absolute path); ``author`` says, at each call, which run, step and call
    writes, for the ``memory_log``.
    """

    name = "remember"
    description = (
        "Remember a short note for later runs in this workspace (they start with every "
        "note): a fact worth not rediscovering, such as how to run the tests. Setting an "
        "existing key replaces it; the oldest notes are forgotten past the caps."
    )

    def __init__(
        self,
        store: Store,
        workspace: str,
        *,
        limits: MemoryLimits = DEFAULT_MEMORY_LIMITS,
    ) -> None:
        super().__init__(store, workspace)
        self.limits = limits
        self.args = _remember_args(limits)

    def accesses(self, args: RememberArgs) -> Sequence[Access]:
        """One ``write`` of ``memory:<key>``."""
        return (Access(Act.WRITE, memory_target(args.key)),)

    def preview(self, args: RememberArgs, *, show_current: bool = True) -> str:
        """The note as it is and as it will be, for an approver."""
        was = self._was(args.key, show_current)
        return f"remember {memory_target(args.key)}\nwas: {was}\nnow: {args.value!r}"

    async def invoke(self, args: RememberArgs, context: ToolContext) -> ToolOutcome:
        """Store the note; the reply names the notes evicted to make room."""
        evicted = self.store.remember(
            self.workspace, args.key, args.value, limits=self.limits, by=_author(context)
        )
        if not evicted:
            return ToolOutcome(f"remembered {args.key}")
        names = ", ".join(entry.key for entry in evicted)
        return ToolOutcome(
            f"remembered {args.key}; evicted the oldest: {names} (caps: {self.limits.describe()})"
        )


class ForgetTool(_MemoryTool, HarnessTool[ForgetArgs]):
    """``forget {key}``: remove a note from the workspace's memory (a ``write`` of it)."""

    name = "forget"
    description = "Forget a note remembered in this workspace, by its key."
    args = ForgetArgs

    def accesses(self, args: ForgetArgs) -> Sequence[Access]:
        """One ``write`` of ``memory:<key>``."""
        return (Access(Act.WRITE, memory_target(args.key)),)

    def preview(self, args: ForgetArgs, *, show_current: bool = True) -> str:
        """The note that would be forgotten, for an approver."""
        return f"forget {memory_target(args.key)}\nwas: {self._was(args.key, show_current)}"

    async def invoke(self, args: ForgetArgs, context: ToolContext) -> ToolOutcome:
        """Remove the note; saying so when it was not remembered."""
        if self.store.forget(self.workspace, args.key, by=_author(context)):
            return ToolOutcome(f"forgot {args.key}")
        return ToolOutcome(f"{args.key} was not remembered")


def memory_notes(entries: Sequence[MemoryEntry]) -> str | None:
    """The notes block a run's first message carries; ``None`` when there are none.

    One ``- key: value`` line a note, oldest first; the lines after the first
    of a value are indented under it.
    """
    if not entries:
        return None
    lines = [NOTES_HEADING]
    for entry in entries:
        first, *rest = entry.value.split("\n")
        lines.append(f"- {entry.key}: {first}")
        lines += [f"  {line}" for line in rest]
    return "\n".join(lines)
