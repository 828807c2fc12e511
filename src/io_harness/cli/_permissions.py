"""The permission side of ``ioh``: approvers on the terminal, pending actions, policy explain."""

from __future__ import annotations

import argparse
import contextlib
import getpass
import shlex
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console, Group, RenderableType
from rich.status import Status
from rich.syntax import Syntax
from rich.text import Text

from io_harness._terminal import shown_argv
from io_harness._validation import read_toml
from io_harness.cli._signals import TerminalInput
from io_harness.cli._text import escape, markup, say, shown
from io_harness.errors import ConfigError
from io_harness.policy import (
    Act,
    ApprovalContext,
    ApprovalRequest,
    Approver,
    Decision,
    DenyAll,
    Policy,
    StdinApprover,
)
from io_harness.policy._approvers import ApproveAll, exact_rule
from io_harness.prepare._answers import check_fits
from io_harness.store import Store
from io_harness.store._records import ApprovalRow, TreePlace

__all__ = [
    "approver_for",
    "cmd_policy_explain",
    "cmd_policy_show",
    "decide_pending",
    "explain_line",
    "policy_for",
    "render_pending",
    "show_console_policy",
]


class PausedStatus:
    """Wraps an approver so the live status line stops while a person is asked.

    The status line comes back, saying the run goes on, once the person has
    answered; an interrupt at the prompt (the ask cancelled) leaves it off, and
    :meth:`abandon` ends the prompt's read of ``terminal``.
    """

    def __init__(self, inner: Approver, terminal: TerminalInput | None = None) -> None:
        self.inner = inner
        self.terminal = terminal
        self.status: Status | None = None

    async def decide(self, request: ApprovalRequest, context: ApprovalContext) -> Decision:
        """The inner approver's decision, asked with the status line stopped."""
        if self.status is not None:
            self.status.stop()
        try:
            decision = await self.inner.decide(request, context)
        except Exception:
            self._restart(context)
            raise
        self._restart(context)
        return decision if decision.by else decision.model_copy(update={"by": _who()})

    def _restart(self, context: ApprovalContext) -> None:
        if self.status is not None:
            # Not what it said before the prompt (the model is no longer answering), drawn
            # at once, before the refresh thread would draw the old words.
            self.status.start()
            self.status.update(f"step {context.step}: going on after the decision")

    def abandon(self) -> None:
        """End the read of a prompt an interrupt left unanswered (and any later one), so no
        thread waits on the terminal for an Enter."""
        if self.terminal is not None:
            self.terminal.wake()


def approver_for(choice: str | None) -> PausedStatus | Approver | None:
    """The approver ``--approve`` names; by default, ask at a terminal and defer elsewhere."""
    if choice is None:
        choice = "ask" if sys.stdin.isatty() else "defer"
    if choice == "ask":
        terminal = TerminalInput.of_stdin()
        if terminal is None:
            return PausedStatus(StdinApprover())
        return PausedStatus(StdinApprover(input=terminal.stream), terminal)
    if choice == "deny":
        return DenyAll("denied by the operator's --approve deny")
    if choice == "approve-all":
        return ApproveAll()
    return None


def policy_for(contract_path: Path, policy_path: Path | None) -> Policy | None:
    """The policy a run gets: ``--policy FILE``, else the contract's ``[policy]``, else none."""
    if policy_path is not None:
        return Policy.from_toml(policy_path)
    data = read_toml(contract_path, "contract")
    return Policy.from_table(data["policy"], str(contract_path)) if "policy" in data else None


def _who() -> str:
    try:
        return f"{getpass.getuser()}@{socket.gethostname()}"
    except (OSError, KeyError):
        return "the operator"


def decide_pending(
    store: Store,
    run_id: str,
    *,
    approve: bool,
    remember: bool,
    reason: str | None,
    request_id: str | None = None,
) -> tuple[ApprovalRequest, Decision]:
    """Store the operator's decision on the action ``run_id`` awaits.

    A run in a sub-agent tree stands for its tree: when it awaits nothing
    itself, the action decided is the one another agent of the tree awaits
    (the child that asked, which paused every agent above it). The run's
    lease is held meanwhile, and in a tree the root's too, which every
    resume of the tree holds, so a resume in progress cannot change the
    action under the decision; ``request_id`` makes sure the action is the
    one the operator reviewed.
    """
    place = store.load_run(run_id).tree
    with contextlib.ExitStack() as held:
        for leased in dict.fromkeys((place.root_id if place else run_id, run_id)):
            held.enter_context(store.lease(leased))
        open_ = _awaited(store, run_id, place)
        if not open_:
            others = " nor does any other agent of its tree" if place is not None else ""
            raise ConfigError(
                f"run {run_id!r} has no action awaiting approval{others} (ioh pending lists them)"
            )
        return _decide(store, open_, approve, remember, reason, request_id)


def _awaited(store: Store, run_id: str, place: TreePlace | None) -> list[ApprovalRow]:
    """The open approvals ``run_id`` may decide: its own, then its tree's others, root first."""
    own = store.approvals(run_id)
    if place is None:
        return own
    others = [
        row
        for node in store.tree(place.root_id)
        if node.run.id != run_id
        for row in store.approvals(node.run.id)
    ]
    return own + others


def _decide(
    store: Store,
    open_: list[ApprovalRow],
    approve: bool,
    remember: bool,
    reason: str | None,
    request_id: str | None,
) -> tuple[ApprovalRequest, Decision]:
    # A tree may await several agents (children paused in one turn): the request the
    # operator names, else the first not yet decided.
    first = next((row for row in open_ if row.status == "pending"), open_[0])
    row = next((row for row in open_ if row.id == request_id), first)
    request = ApprovalRequest.model_validate_json(row.request_json)
    if request_id is not None and request_id != row.id:
        raise ConfigError(
            f"run {row.run_id!r} now awaits request {row.id} ({request.describe()}), "
            f"not {request_id}; review it with ioh pending"
        )
    by = f"{_who()} (ioh {'approve' if approve else 'deny'})"
    if approve:
        rules = []
        if remember:
            rule = exact_rule(request)
            if rule is None:
                raise ConfigError(
                    f"{request.target!r} holds * or ?, so it cannot be remembered exactly"
                )
            rules.append(rule)
        decision = Decision.approve(remember=rules, by=by)
    else:
        decision = Decision.deny(reason or "denied by the operator", by=by)
    check_fits(row.run_id, request, decision)  # a question is answered (ioh answer), or denied
    store.decide(row.id, decision)
    return request, decision


def render_pending(
    rows: list[ApprovalRow], roots: Mapping[str, str] | None = None, hint: str = ""
) -> RenderableType:
    """What ``ioh pending`` prints: each waiting action, why it asks, its command as the
    process gets it, its diff, and the ``ioh approve`` / ``ioh deny`` that decides it.

    ``roots`` maps a sub-agent's run id to its tree's root, named on its line:
    ``ioh approve ROOT`` decides it and resumes the tree. ``hint`` is appended to
    the commands suggested (``--store PATH``).
    """
    roots = roots or {}
    if not rows:
        return Text("no actions are awaiting approval")
    parts: list[RenderableType] = []
    for row in rows:
        request = ApprovalRequest.model_validate_json(row.request_json)
        verdict = request.verdict
        why = (
            f"rule '{verdict.rule}' in layer '{verdict.layer}'"
            if verdict.rule is not None
            else f"the default for {request.act.value}"
        )
        if request.question is not None:
            why = "the agent (a question)"
        state = {
            "decided": " (decided; resume performs it)",
            "performing": " (was being performed when the run stopped; resume reports it)",
        }.get(row.status, "")
        root = roots.get(row.run_id, row.run_id)
        tree = f" (tree {escape(root, one_line=True)})" if root != row.run_id else ""
        parts.append(
            markup(
                f"[bold]{escape(row.run_id, one_line=True)}[/]{tree} step {row.step}: "
                f"{escape(request.describe(), one_line=True)}{escape(state)}\n"
                f"  asked by {escape(why, one_line=True)}; request {escape(row.id)}, "
                f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(row.created_at))}"
            )
        )
        if request.choices:
            parts.append(Text(f"  choices: {shown_argv(request.choices)}"))
        if request.argv is not None:
            parts.append(Text(f"  command: {shown_argv(request.argv)}"))
        if request.diff:
            parts.append(Syntax(shown(request.diff.rstrip()), "diff", theme="ansi_dark"))
        if row.status == "pending" and request.question is not None:
            target = shown(shlex.quote(root))
            parts.append(Text(f"  answer: ioh answer {target} TEXT{shown(hint)}"))
        elif row.status == "pending":
            target = shown(shlex.quote(root) + hint)
            parts.append(
                Text(
                    f"  decide: ioh approve {target} [--remember] | ioh deny {target} --reason TEXT"
                )
            )
    return Group(*parts)


def cmd_policy_explain(args: argparse.Namespace, console: Console) -> int:
    """``ioh policy explain FILE ACT TARGET [--provider SPEC]``."""
    policy = policy_for(args.file, None)
    text = explain_line(policy, args.act, args.target, args.file, args.provider)
    console.print(escape(text), soft_wrap=True)
    return 0


def cmd_policy_show(args: argparse.Namespace, console: Console) -> int:
    """``ioh policy show FILE [--provider SPEC]``."""
    show_console_policy(console, policy_for(args.file, None), args.file, args.provider)
    return 0


def explain_line(
    policy: Policy | None, act: str, target: str, source: Path, providers: Sequence[str] = ()
) -> str:
    """The verdict ``ioh policy explain`` prints, and which policy gave it.

    With ``providers`` (specs), a ``net`` target is also decided as one of
    the provider's own connections, under the run's ``provider`` layer; when
    that verdict differs from the one other connections get, both are said.
    """
    try:
        chosen = Act(act)
    except ValueError:
        raise ConfigError(
            f"unknown act {act!r}; the acts are: {', '.join(a.value for a in Act)}"
        ) from None
    effective = policy if policy is not None else Policy.default()
    verdict = effective.explain(chosen, target)
    line = verdict.describe()
    if providers and chosen is Act.NET:
        from io_harness._net import provider_policy
        from io_harness.providers._spec import endpoints_of_specs

        own = provider_policy(effective, endpoints_of_specs(providers)).explain(chosen, target)
        if own != verdict:
            line = (
                f"the provider's own connections: {own.describe()}\n"
                f"any other connection (tools, commands, MCP servers): {line}"
            )
    if policy is None:
        return f"{source} has no [policy]; runs use the default one: {line}"
    return line


def show_console_policy(
    console: Console, policy: Policy | None, source: Path, providers: Sequence[str] = ()
) -> None:
    """Print a policy in full (``ioh policy show``), and the provider layer ``providers`` add."""
    if policy is None:
        said = (
            f"{source} has no [policy]; runs use the default policy "
            "(read, write and exec allowed, net denied)"
        )
        say(console, escape(said))
    else:
        say(console, escape(policy.describe()))
    if providers:
        from io_harness._net import provider_policy
        from io_harness.providers._spec import endpoints_of_specs

        effective = policy if policy is not None else Policy.default()
        layered = provider_policy(effective, endpoints_of_specs(providers))
        layer = layered.layers[-1]
        rules = [f"  {rule}" for rule in layer.rules] or ["  (no rules: it connects nowhere)"]
        say(
            console,
            escape(
                f"for the provider's own connections only, a run adds last (and to each bound):\n"
                f"layer {layer.name}:\n" + "\n".join(rules)
            ),
        )
