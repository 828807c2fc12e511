"""Compaction: the model's view of a long run, fitted to its context window, the task kept.

The transcript in the store is never rewritten. A compaction pass adds
*edits* beside it: a summary, and marks on the messages that no longer need
to be sent. :class:`View` rebuilds what the model is shown from the
transcript and the edits, so a resume shows the same view and pays for no
pass twice.

A pass is one call of the run's model, offered only ``write_summary`` and
``mark_for_deletion``, on a numbered rendering of the transcript. What it
asks is checked here: it can never delete the first user message (the
task), the last ``keep_recent`` messages of the view, or half of a tool call
and its results (a pair goes together or not at all). The system prompt,
which holds the success condition, is not a message and is always sent;
summaries are shown inside the first user message, after the task.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict, Field

from io_harness._validation import CheckedModel
from io_harness.compaction._settings import Compaction
from io_harness.messages import (
    CompletionRequest,
    Message,
    TextBlock,
    ToolCall,
    ToolResult,
    ToolSpec,
)

__all__ = [
    "COMPACTOR_TOOLS",
    "Compaction",
    "Edit",
    "View",
    "apply_pass",
    "compactor_request",
    "deletable",
    "estimate_tokens",
    "partners",
    "protected",
]

_CHARS_PER_TOKEN = 4
_SHOWN_CHARS = 1500
"""How much of one message the compactor is shown (its start and end)."""
SUMMARY_HEADING = "[Summary of earlier steps, written when the conversation was compacted]"


@dataclass(frozen=True, slots=True)
class Edit:
    """One edit of the view: a ``summary`` (its text) or a ``delete`` of message ``message``.

    ``message`` is the message's position in the transcript, from 1 (its
    ``seq`` in the store); ``step`` the step the pass ran before.
    """

    kind: Literal["summary", "delete"]
    step: int
    message: int | None = None
    text: str | None = None


class View:
    """The model's view of a transcript under a run's edits."""

    def __init__(self, edits: Iterable[Edit] = ()) -> None:
        self.edits: list[Edit] = []
        self.deleted: set[int] = set()
        self.summaries: list[str] = []
        self.add(edits)

    def add(self, edits: Iterable[Edit]) -> None:
        """Take more edits (a pass's)."""
        for edit in edits:
            self.edits.append(edit)
            if edit.kind == "delete" and edit.message is not None:
                self.deleted.add(edit.message)
            elif edit.kind == "summary" and edit.text:
                self.summaries.append(edit.text)

    def passes(self) -> int:
        """How many passes made these edits (each writes one summary)."""
        return len(self.summaries)

    def apply(self, messages: Sequence[Message]) -> list[Message]:
        """The messages the model is sent: the deleted ones left out, summaries in the first."""
        shown = [m for seq, m in enumerate(messages, start=1) if seq not in self.deleted]
        if self.summaries and shown:
            notes = "\n\n".join(self.summaries)
            first = shown[0]
            shown[0] = first.model_copy(
                update={"content": (*first.content, TextBlock(text=f"{SUMMARY_HEADING}\n{notes}"))}
            )
        return shown

    def kept(self, messages: Sequence[Message]) -> list[int]:
        """The positions (from 1) of the messages still in the view."""
        return [seq for seq in range(1, len(messages) + 1) if seq not in self.deleted]


def estimate_tokens(request: CompletionRequest) -> int:
    """A request's size in tokens, estimated from its JSON (four characters a token)."""
    return len(request.model_dump_json()) // _CHARS_PER_TOKEN


def partners(messages: Sequence[Message]) -> dict[int, int]:
    """Each tool call's message and the message of its results, both ways (positions from 1)."""
    paired: dict[int, int] = {}
    for seq, message in enumerate(messages, start=1):
        if message.role == "assistant" and message.tool_calls and seq < len(messages):
            following = messages[seq]  # the message after it, at position seq + 1
            if following.role == "tool":
                paired[seq], paired[seq + 1] = seq + 1, seq
    return paired


def protected(messages: Sequence[Message], view: View, keep_recent: int) -> set[int]:
    """What a pass may not delete: the first message, the last ``keep_recent`` of the view, and
    the partner of each of those (a pair is kept whole)."""
    kept = view.kept(messages)
    guarded = {1} | set(kept[-keep_recent:] if keep_recent else [])
    paired = partners(messages)
    return guarded | {paired[seq] for seq in guarded if seq in paired}


def deletable(messages: Sequence[Message], view: View, guarded: set[int]) -> list[int]:
    """The positions a pass guarded by ``guarded`` may leave out of the view (none: the pass
    could free nothing)."""
    return [seq for seq in view.kept(messages) if seq not in guarded]


class _Summary(CheckedModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    text: str = Field(min_length=1)


class _Deletion(CheckedModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    ids: list[int]


COMPACTOR_TOOLS = (
    ToolSpec(
        name="write_summary",
        description=(
            "Write the summary that replaces the messages you delete: what has been done, "
            "what was learned (file contents, errors, decisions) and what is left to do."
        ),
        parameters={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        name="mark_for_deletion",
        description=(
            "Mark messages, by their #id, as no longer needed. A tool call and its results "
            "go together; protected messages cannot be deleted."
        ),
        parameters={
            "type": "object",
            "properties": {"ids": {"type": "array", "items": {"type": "integer"}}},
            "required": ["ids"],
            "additionalProperties": False,
        },
    ),
)

_COMPACTOR_SYSTEM = (
    "You compact the conversation of an agent that is working on a task, because it "
    "no longer fits the model's context window. The messages are numbered (#id). Call "
    "write_summary once with a summary that lets the agent go on without the messages "
    "you delete: what is done, what was learned (file contents, errors, decisions) and "
    "what is left. Then call mark_for_deletion with the ids of the messages the summary "
    "makes unneeded: old tool calls and their results first. Messages marked protected "
    "cannot be deleted; a tool call and its results are deleted together."
)


def compactor_request(
    model: str,
    goal: str,
    messages: Sequence[Message],
    view: View,
    guarded: set[int],
    max_tokens: int,
) -> CompletionRequest:
    """The pass's request: the view of the transcript, numbered, and the two tools."""
    lines = [f"The agent's task: {goal}", "", "The conversation so far:"]
    for seq in view.kept(messages):
        mark = " (protected)" if seq in guarded else ""
        lines.append(f"#{seq} {messages[seq - 1].role}{mark}: {_shown(messages[seq - 1])}")
    if view.summaries:
        lines += ["", "Summaries written before:", *view.summaries]
    return CompletionRequest.model_construct(
        model=model,
        system=_COMPACTOR_SYSTEM,
        messages=(Message.user("\n".join(lines)),),
        tools=COMPACTOR_TOOLS,
        max_tokens=max_tokens,
        temperature=None,
    )


def _shown(message: Message) -> str:
    parts: list[str] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolCall):
            parts.append(f"[calls {block.name} {json.dumps(block.arguments, default=str)}]")
        elif isinstance(block, ToolResult):
            parts.append(f"[result of {block.tool_use_id}] {block.content}")
    text = " ".join(parts)
    if len(text) <= _SHOWN_CHARS:
        return text
    half = _SHOWN_CHARS // 2
    return f"{text[:half]} [... {len(text) - _SHOWN_CHARS} characters ...] {text[-half:]}"


def apply_pass(
    calls: Sequence[ToolCall],
    messages: Sequence[Message],
    view: View,
    guarded: set[int],
    step: int,
) -> tuple[list[Edit], list[str]]:
    """The edits a pass's calls make, checked; and what was refused, said once each.

    Deleting one message of a pair deletes both. A pass that deletes
    nothing, or writes no summary while deleting, is what it is: the caller
    decides whether the view now fits.
    """
    edits: list[Edit] = []
    refused: list[str] = []
    paired = partners(messages)
    for call in calls:
        arguments: Any = call.arguments
        if call.name == "write_summary":
            try:
                summary = _Summary.model_validate(arguments)
            except Exception as exc:  # a bad call is refused, never a crash
                refused.append(f"write_summary: {exc}")
                continue
            edits.append(Edit("summary", step, text=summary.text))
        elif call.name == "mark_for_deletion":
            try:
                deletion = _Deletion.model_validate(arguments)
            except Exception as exc:
                refused.append(f"mark_for_deletion: {exc}")
                continue
            for seq in deletion.ids:
                whole = {seq} | ({paired[seq]} if seq in paired else set())
                if not all(1 <= s <= len(messages) for s in whole):
                    refused.append(f"#{seq} is not a message")
                elif whole & guarded:
                    refused.append(f"#{seq} is protected (or paired with a protected one)")
                else:
                    taken = {e.message for e in edits}
                    edits += [
                        Edit("delete", step, message=s)
                        for s in sorted(whole)
                        if s not in view.deleted and s not in taken
                    ]
        else:
            refused.append(f"{call.name} is not a compactor tool")
    return edits, refused
