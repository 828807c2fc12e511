"""``ask_user``: the model's question to the person, and who may answer it at once.

The tool itself never runs: the engine answers its call (an :class:`Answerer`, an
approver's :meth:`~io_harness.Decision.answered`, or an answer given on resume),
or defers it as it defers an act, in the same ``approvals`` row (see
``loop/_asking.py`` and ``docs/asking.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pydantic import Field

from io_harness._terminal import shown
from io_harness.errors import ConfigError
from io_harness.policy._approvers import TerminalPrompt
from io_harness.policy._gate import Access
from io_harness.tools._base import Args, HarnessTool, ToolContext, ToolOutcome

__all__ = ["ASK_USER", "Answerer", "AskUserTool", "Question", "StdinAnswerer", "answer_problem"]

ASK_USER = "ask_user"


@dataclass(frozen=True, slots=True)
class Question:
    """What the model asks the person: the question, and the answers it allows (if any)."""

    run_id: str
    step: int
    call_id: str
    question: str
    choices: tuple[str, ...] | None = None


@runtime_checkable
class Answerer(Protocol):
    """Answers the model's questions at once: the answer's text, or ``None`` to defer (the
    run stops ``AWAITING_ANSWER`` until an answer is given, in any later process)."""

    async def __call__(self, question: Question) -> str | None:
        """The answer to ``question``, or ``None``."""
        ...


class AskArgs(Args):
    """The arguments of ``ask_user``."""

    question: str = Field(min_length=1, description="What to ask the person, in one message")
    choices: list[str] | None = Field(
        None, min_length=1, description="The answers the person may give, when only some fit"
    )


class AskUserTool(HarnessTool[AskArgs]):
    """Ask the person a question; their answer is the result."""

    name = ASK_USER
    description = (
        "Ask the person who gave you the task a question and wait for the answer, which is "
        "this tool's result. Use it only when you cannot go on without them; give choices "
        "when only some answers fit."
    )
    args = AskArgs
    reads_only = True

    def accesses(self, args: AskArgs) -> Sequence[Access]:
        """A question acts on nothing: the policy is not asked."""
        return ()

    async def invoke(self, args: AskArgs, context: ToolContext) -> ToolOutcome:
        """Reached only outside a run's engine, where nobody can answer."""
        return ToolOutcome(f"{ASK_USER}: nobody can answer here", is_error=True)


def answer_problem(text: object, choices: Sequence[str] | None) -> str | None:
    """Why ``text`` cannot answer a question allowing ``choices``, or ``None``."""
    if not isinstance(text, str):
        return f"an answer is text, not {type(text).__name__}"
    if choices and text not in choices:
        return f"{text!r} is not one of the choices: {', '.join(repr(c) for c in choices)}"
    return None


def checked_asking(ask: object, answerer: object) -> tuple[bool, Answerer | None]:
    """A harness's ``ask`` and ``answerer`` (a callable), or a ConfigError naming the bad one."""
    if not isinstance(ask, bool):
        raise ConfigError(f"ask must be True or False, not {ask!r}")
    if answerer is not None and not callable(answerer):
        raise ConfigError(f"answerer must be callable, not {type(answerer).__name__}")
    return ask, answerer


class StdinAnswerer(TerminalPrompt):
    """Asks the person at the terminal; an empty line or the end of input defers.

    The question and its choices are shown escaped (as ``ioh show`` escapes
    them); with choices, an answer outside them is asked again (a number picks one).
    """

    async def __call__(self, question: Question) -> str | None:
        """Show the question and read the answer; ``None`` when nobody answers."""
        try:
            return await self._ask(question)
        except OSError:  # nobody can see the prompt (a closed pipe)
            return None

    async def _ask(self, question: Question) -> str | None:
        self._write(f"\nthe agent asks: {shown(question.question)}\n")
        choices = question.choices or ()
        for number, choice in enumerate(choices, 1):
            self._write(f"  {number}. {shown(choice)}\n")
        while True:
            text = await self._line("answer (empty to answer later): ")
            if not text:  # an empty line, or the end of input
                return None
            if text.isdigit() and 0 < int(text) <= len(choices):
                picked: str = choices[int(text) - 1]
                return picked
            problem = answer_problem(text, choices)
            if problem is None:
                return text
            self._write(f"{problem}\n")
