"""The approvers io-harness ships: approve all, deny all, ask on a terminal, or a callback."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import sys
from collections.abc import Awaitable, Callable
from typing import IO, Any

from io_harness._terminal import escaped_json, quoted, shown, shown_argv
from io_harness.errors import ConfigError
from io_harness.policy._approval import ApprovalContext, ApprovalRequest, Decision
from io_harness.policy._rules import Act, Effect, Rule

__all__ = ["ApproveAll", "CallbackApprover", "DenyAll", "StdinApprover", "exact_rule"]


def exact_rule(request: ApprovalRequest, effect: Effect = Effect.ALLOW) -> Rule | None:
    """A rule for exactly this act and target, or ``None`` when the target holds a wildcard.

    A path is anchored at the workspace root (``./notes.md``), so it does not
    also match ``notes.md`` in other folders; a program is named as the
    request named it. Globs have no escapes, so a target with ``*`` or ``?``
    in it cannot be named exactly; remembering it would allow more than was
    approved.
    """
    if "*" in request.target or "?" in request.target:
        return None
    glob = f"./{request.target}" if request.act in (Act.READ, Act.WRITE) else request.target
    return Rule(act=request.act, glob=glob, effect=effect)


class ApproveAll:
    """Approves every request: for trusted runs and tests."""

    async def decide(self, request: ApprovalRequest, context: ApprovalContext) -> Decision:
        """Approve."""
        return Decision.approve()


class DenyAll:
    """Denies every request with the same reason."""

    def __init__(self, reason: str = "no approvals are given to this run") -> None:
        self.reason = reason

    async def decide(self, request: ApprovalRequest, context: ApprovalContext) -> Decision:
        """Deny with :attr:`reason`."""
        return Decision.deny(self.reason)


Callback = Callable[[ApprovalRequest, ApprovalContext], Decision | Awaitable[Decision]]


class CallbackApprover:
    """Asks a function (plain or async) for each decision."""

    def __init__(self, fn: Callback) -> None:
        if not callable(fn):
            raise ConfigError("CallbackApprover needs a callable(request, context) -> Decision")
        self.fn = fn

    async def decide(self, request: ApprovalRequest, context: ApprovalContext) -> Decision:
        """Whatever the function returns; anything but a :class:`Decision` is a denial."""
        answer = self.fn(request, context)
        if inspect.isawaitable(answer):
            answer = await answer
        if not isinstance(answer, Decision):
            return Decision.deny(
                f"the approval callback returned {type(answer).__name__}, not a Decision"
            )
        return answer


class TerminalPrompt:
    """A prompt at the terminal: text written to ``output`` (stderr), lines read from
    ``input`` (stdin) without blocking the event loop. Shared by :class:`StdinApprover`
    and the CLI's answerer of questions."""

    def __init__(self, input: IO[str] | None = None, output: IO[str] | None = None) -> None:
        self.input = input
        self.output = output

    def _write(self, text: str) -> None:
        out = self.output or sys.stderr
        out.write(text)
        out.flush()

    async def _line(self, prompt: str) -> str | None:
        """``prompt``, then the line read, stripped; ``None`` at the end of input."""
        self._write(prompt)
        line = await asyncio.to_thread((self.input or sys.stdin).readline)
        return None if line == "" else line.strip()


class StdinApprover(TerminalPrompt):
    """Asks a person at the terminal: shows the act, the target, the command as the process
    gets it, the call's arguments and the diff, every character that could act on the
    terminal or hide what a line says escaped (as ``ioh show`` escapes it).

    Answers: ``y`` approve, ``n`` deny (a reason is asked for), ``r`` approve
    and remember an allow for exactly this act and target, ``d`` defer. End of
    input defers: nobody is there to ask; so does an output the prompt cannot be
    written to (a closed pipe).
    """

    async def decide(self, request: ApprovalRequest, context: ApprovalContext) -> Decision:
        """Show the request and read the answer; defer when nobody can see or answer it."""
        try:
            return await self._ask(request, context)
        except OSError:  # the prompt cannot be shown (a closed pipe): nobody is there to ask
            return Decision.defer()

    async def _ask(self, request: ApprovalRequest, context: ApprovalContext) -> Decision:
        self._write(_show(request, context))
        while True:
            answer = await self._line("approve? [y]es / [n]o / [r]emember / [d]efer: ")
            if answer is None or answer.lower() in ("d", "defer"):
                return Decision.defer()
            choice = answer.lower()[:1]
            if choice == "y":
                return Decision.approve()
            if choice == "r":
                rule = exact_rule(request)
                if rule is None:
                    self._write("this target holds * or ?, so it cannot be remembered exactly\n")
                    continue
                return Decision.approve(remember=(rule,))
            if choice == "n":
                reason = await self._line("reason (the model reads it): ")
                return Decision.deny(reason or "denied at the terminal")
            self._write("answer y, n, r or d\n")


_ARGUMENT_CHARS = 200
"""How much of one argument's JSON the prompt shows when the change below shows it whole."""


def _show(request: ApprovalRequest, context: ApprovalContext) -> str:
    """The request as the person asked reads it: every value :func:`shown`, on its own line.

    Each field is one line, so nothing the model wrote (a path, an argument, a
    goal a parent agent gave) can break its line and pass for the next field;
    the command is the argv the process gets, each argument quoted; the diff's
    lines are indented under ``change:``.
    """
    verdict = request.verdict
    why = (
        f"rule {verdict.rule} in layer {verdict.layer}"
        if verdict.rule is not None
        else f"the default for {request.act.value}"
    )
    lines = [
        "",
        f"── approval needed, run {shown(context.run_id, one_line=True)} step {context.step} ──",
        f"goal:      {shown(context.goal, one_line=True)}",
        f"wants:     {request.act.value} {_target(request.target)} "
        f"({shown(request.tool, one_line=True)})",
    ]
    if request.argv is not None:
        lines.append(f"command:   {shown_argv(request.argv)}")
    lines.append(f"arguments: {_arguments(request.arguments, cut=bool(request.diff))}")
    lines.append(f"asked by {shown(why, one_line=True)}")
    if request.diff:
        lines.append("change:")
        lines.extend(f"  {line}" for line in shown(request.diff.rstrip()).split("\n"))
    return "\n".join(lines) + "\n"


_PLAIN = re.compile(r"[\w@%+=:,./-]+", re.ASCII)
"""A target that needs no quotes: what a shell would not quote either."""


def _target(target: str) -> str:
    return target if _PLAIN.fullmatch(target) else quoted(target)


def _arguments(arguments: dict[str, Any], *, cut: bool) -> str:
    """The call's arguments as JSON, inert; with ``cut``, a long one is cut, saying so."""
    parts = []
    for key, value in arguments.items():
        text = _json(value)
        if cut and len(text) > _ARGUMENT_CHARS:
            left = len(text) - _ARGUMENT_CHARS
            text = f"{text[:_ARGUMENT_CHARS]}… [+{left} chars; the change below shows it]"
        parts.append(f"{_json(key)}: {text}")
    return "{" + ", ".join(parts) + "}"


def _json(value: object) -> str:
    return escaped_json(json.dumps(value, ensure_ascii=False, default=str))
