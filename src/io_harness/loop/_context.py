"""Assembling what the model is told: the system prompt, the task, criterion feedback."""

from __future__ import annotations

from collections.abc import Sequence

from io_harness.contract import TaskContract
from io_harness.messages import Message
from io_harness.tools._names import MCP_PREFIX
from io_harness.tools._skills import Skill, skills_catalogue
from io_harness.verify import VerificationResult

__all__ = ["FEEDBACK_CHARS", "clip_tail", "failing_check_message", "system_prompt", "task_message"]

FEEDBACK_CHARS = 8000
"""How much of a failing check's output the model is shown: the end, where summaries are."""


def system_prompt(
    contract: TaskContract, tool_names: Sequence[str], skills: Sequence[Skill] = ()
) -> str:
    """The system prompt of a run: role, subject, tools, skills, success condition, constraints.

    Skills appear as a catalogue of names and descriptions; ``read_skill``
    reads a body when the model wants it.
    """
    if contract.mode == "file":
        assert contract.path is not None
        subject = (
            f"You work on one file, `{contract.path.name}`. The file tools read and write "
            "that file only."
        )
    else:
        subject = (
            "You work in a folder (the workspace). Every path you give is relative to its "
            "root; paths outside it are refused."
        )
    parts = [
        "You are an agent run by io-harness. The harness, not you, decides whether the "
        "task is done: the run succeeds only when the success condition below holds.",
        subject,
        _tools_line(tool_names),
    ]
    if skills:
        parts.append(skills_catalogue(skills))
    parts.append(f"Success condition: {contract.verify.describe()}")
    if contract.constraints:
        parts.append("Constraints:\n" + "\n".join(f"- {c}" for c in contract.constraints))
    parts.append(
        "The harness checks the condition after every step that changes a file and "
        "whenever you end your turn without calling a tool. If it does not hold when you "
        "end your turn, you are shown why and the work goes on."
    )
    return "\n\n".join(parts)


def _tools_line(tool_names: Sequence[str]) -> str:
    """The tools by name; MCP servers' by server, since their lists may change mid-run."""
    own = [name for name in tool_names if not name.startswith(MCP_PREFIX)]
    servers = sorted({name.split("__")[1] for name in tool_names if name.startswith(MCP_PREFIX)})
    line = f"Your tools: {', '.join(own)}."
    if servers:
        line += (
            f" Tools of the MCP servers {', '.join(servers)} are offered too, named "
            "mcp__<server>__<tool>; a server may change its list during the run."
        )
    return line


def task_message(contract: TaskContract, notes: str | None = None) -> Message:
    """The first user message: the goal, then the notes remembered in this workspace, if any."""
    if notes is None:
        return Message.user(contract.goal)
    return Message.user(f"{contract.goal}\n\n{notes}")


def clip_tail(text: str, limit: int) -> str:
    """The last ``limit`` characters of ``text``, saying how many were cut before them."""
    if len(text) <= limit:
        return text
    return f"[... the first {len(text) - limit} characters are cut ...]\n{text[-limit:]}"


def failing_check_message(result: VerificationResult) -> Message:
    """What the model is told when it ends its turn and the criterion fails."""
    return Message.user(
        "The success condition does not hold yet.\n\n"
        f"Output of the check:\n{clip_tail(result.output, FEEDBACK_CHARS)}\n\n"
        "Keep working until it holds."
    )
