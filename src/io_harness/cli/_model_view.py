"""``ioh show --view model``: the messages the model is sent at a run's end.

A compaction pass edits the model's view, never the transcript: the view is
the messages less those a pass left out, with its summaries after the task.
"""

from __future__ import annotations

import json

from rich.console import RenderableType

from io_harness.cli._brief import call_arguments, count, one_line
from io_harness.cli._text import escape, markup, shown
from io_harness.compaction._pass import Edit, View
from io_harness.messages import Message, TextBlock, ThinkingBlock, ToolCall, ToolResult
from io_harness.store import Trace
from io_harness.store._by_step import message_steps

__all__ = ["model_view"]


def model_view(trace: Trace, passes: int) -> list[RenderableType]:
    """The messages the model is sent at the run's end, each under its position and step,
    after a line saying how many of the run's ``passes`` made the view."""
    view = View(
        Edit("summary" if e.kind == "summary" else "delete", e.step, e.message, e.text)
        for e in trace.compactions
    )
    messages = trace.messages
    shown_messages = view.apply(messages)
    how = (
        f"after {count(passes, 'compaction pass', 'compaction passes')}"
        if passes
        else "no compaction: the whole transcript"
    )
    parts: list[RenderableType] = [
        markup(
            f"[bold]the model's view after step {trace.run.steps}:[/] {len(shown_messages)} of "
            f"{count(len(messages), 'message', 'messages')}, {how}\n"
            "[dim](the system prompt, with the success condition, goes with every request)[/]"
        )
    ]
    owners = message_steps(messages)
    for seq, message in zip(view.kept(messages), shown_messages, strict=True):
        where = "the task" if seq == 1 else f"step {owners[seq - 1]}"
        lines = [f"[bold]#{seq} {escape(message.role)}[/] [dim]({where})[/]"]
        # A tool message answers the calls of the message before it.
        calls = messages[seq - 2].tool_calls if seq > 1 else ()
        lines.extend(_block_lines(message, {call.id: call.name for call in calls}))
        parts.append(markup("\n".join(lines)))
    return parts


def _block_lines(message: Message, names: dict[str, str]) -> list[str]:
    """A message's blocks as the model is sent them: text whole, calls and results in brief.

    ``names`` names the calls a tool message's results answer, by call id.
    """
    lines: list[str] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            lines.extend(f"  {escape(line)}".rstrip() for line in shown(block.text).splitlines())
        elif isinstance(block, ThinkingBlock):
            said = "redacted" if block.redacted else f"{len(block.text):,} characters"
            lines.append(f"  [dim](thinking: {said})[/]")
        elif isinstance(block, ToolCall):
            arguments = (
                block.arguments
                if isinstance(block.arguments, str)
                else json.dumps(block.arguments, default=str)
            )
            called = escape(f"{block.name}({call_arguments(arguments)})", one_line=True)
            lines.append(f"  [dim]calls[/] {called}")
        elif isinstance(block, ToolResult):
            mark = "[red]error[/]" if block.is_error else "[green]ok[/]"
            name = names.get(block.tool_use_id, block.tool_use_id)
            lines.append(f"  {mark} {escape(name, one_line=True)} -> {one_line(block.content, 70)}")
    return lines
