"""The gate: the one checked entry point for every act on the agent's behalf.

It decides acts, not tools: a caller names the act and target
(:class:`Access`), the gate answers with the policy's verdict, asks the
approver when the verdict is *ask*, and writes a trace row for every verdict
and decision. Rules an approver asks to remember form a run-scoped top
layer: a remembered allow answers a later ask, and a deny anywhere still wins.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from io_harness.policy._approval import ApprovalContext, ApprovalRequest, Approver, Decision
from io_harness.policy._policy import Policy
from io_harness.policy._rules import Act, Effect, Rule, Verdict
from io_harness.store._records import PermissionRow

__all__ = ["REMEMBERED", "Access", "Cleared", "Deferred", "Gate", "Refused"]

REMEMBERED = "remembered"
"""The name of the run-scoped layer of remembered rules."""


@dataclass(frozen=True, slots=True)
class Access:
    """One act on one target: a canonical path, a program (with its argv) or host[:port]."""

    act: Act
    target: str
    argv: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Cleared:
    """The act may happen; ``decision`` is the approval when one was needed."""

    verdict: Verdict
    decision: Decision | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    """The act may not happen; ``observation`` tells the model why."""

    observation: str


@dataclass(frozen=True, slots=True)
class Deferred:
    """The approver will decide later; the action waits in the store."""

    request: ApprovalRequest


Clearance = Cleared | Refused | Deferred


@dataclass
class Gate:
    """Checks acts against ``policy``, asks ``approver``, and keeps the trace rows.

    Without an approver, every ask is deferred: an unattended run stops and
    waits instead of guessing. ``rows`` collects the rows of the step in
    progress; the loop takes them into the step's transaction.
    """

    policy: Policy
    approver: Approver | None = None
    goal: str = ""
    run_id: str = ""
    remembered: list[Rule] = field(default_factory=list)
    step: int = 0
    rows: list[PermissionRow] = field(default_factory=list)
    remembered_changed: bool = False
    settled: dict[tuple[str, Act, str], Decision | Verdict] = field(default_factory=dict)
    """What decided each act of each call (by call id, act, target): the
    approver's decision, or the policy's verdict (see :meth:`decision_on`)."""

    _call: contextvars.ContextVar[str] = field(
        default_factory=lambda: contextvars.ContextVar("ioh_gate_call", default=""), repr=False
    )

    @property
    def call_id(self) -> str:
        """The tool call whose acts are being checked (``""``: the harness's own, such as the
        criterion's commands): the innermost :meth:`calling` block of this task."""
        return self._call.get()

    @contextlib.contextmanager
    def calling(self, call_id: str) -> Iterator[None]:
        """Check and record the acts of the block as those of ``call_id``.

        The scope is the task's (a context variable), so what runs for a call,
        a connection of an MCP server's or a sandbox proxy's included, is
        recorded under it, and nothing another task does can change it.
        """
        token = self._call.set(call_id)
        try:
            yield
        finally:
            self._call.reset(token)

    def verdict(self, access: Access) -> Verdict:
        """The policy's verdict, with the remembered layer over it."""
        base = self.policy.explain(access.act, access.target)
        if base.effect is Effect.DENY:
            return base
        mine = [r for r in self.remembered if r.act is access.act and r.matches(base.target)]
        for effect in (Effect.DENY, Effect.ALLOW) if base.effect is Effect.ASK else (Effect.DENY,):
            for rule in mine:
                if rule.effect is effect:
                    return base.model_copy(
                        update={"effect": effect, "rule": rule, "layer": REMEMBERED}
                    )
        return base

    def readable(self, target: str) -> bool:
        """Whether a walk may read ``target`` without asking; a file it may not is a row."""
        verdict = self.verdict(Access(Act.READ, target))
        if verdict.effect is Effect.ALLOW:
            return True
        self.record(Access(Act.READ, target), verdict, "skipped", "policy")
        return False

    def readable_quietly(self, target: str) -> bool:
        """Whether ``target`` may be read without asking; no trace row (a preview's question)."""
        return self.verdict(Access(Act.READ, target)).effect is Effect.ALLOW

    def check_outright(self, access: Access) -> Verdict:
        """The verdict for an act that cannot wait for a person (the criterion's commands)."""
        verdict = self.verdict(access)
        allowed = verdict.effect is Effect.ALLOW
        self.record(access, verdict, "allowed" if allowed else "refused", _by(verdict))
        return verdict

    async def authorize(
        self,
        access: Access,
        request: Callable[[Verdict], ApprovalRequest],
        decision: Decision | None = None,
    ) -> Clearance:
        """Decide one act: allow, refuse, or ask the approver (``decision`` answers instead).

        ``request`` builds what the approver is shown, from the verdict.
        """
        verdict = self.verdict(access)
        key = (self.call_id, verdict.act, verdict.target)
        if decision is not None and decision.kind == "deny" and verdict.effect is not Effect.DENY:
            # A person's deny stands even where a policy replaced since would allow.
            return self._denied(access, verdict, decision, request(verdict))
        if verdict.effect is Effect.ALLOW:
            self.record(access, verdict, "allowed", _by(verdict))
            self.settled[key] = verdict
            return Cleared(verdict)
        if verdict.effect is Effect.DENY:
            self.record(access, verdict, "refused", _by(verdict))
            self.settled[key] = verdict
            return Refused(f"refused by the policy: {verdict.describe()}")
        asked = request(verdict)
        if decision is None:
            decision = await self._ask(asked, verdict)
        by = decision.by or (type(self.approver).__name__ if self.approver else "nobody")
        if decision.kind == "defer":
            self.record(access, verdict, "deferred", by)
            return Deferred(asked)
        if decision.kind == "deny":
            return self._denied(access, verdict, decision, asked)
        self.settled[key] = decision.model_copy(update={"by": by})
        self.record(access, verdict, "approved", by)
        if decision.remember:
            self.remembered.extend(decision.remember)
            self.remembered_changed = True
        return Cleared(verdict, decision)

    def _denied(
        self, access: Access, verdict: Verdict, decision: Decision, asked: ApprovalRequest
    ) -> Refused:
        by = decision.by or (type(self.approver).__name__ if self.approver else "nobody")
        self.settled[(self.call_id, verdict.act, verdict.target)] = decision.model_copy(
            update={"by": by}
        )
        self.record(access, verdict, "denied", by, decision.reason)
        return Refused(
            f"the approver denied {asked.describe()}: {decision.reason or 'no reason given'}"
        )

    async def _ask(self, request: ApprovalRequest, verdict: Verdict) -> Decision:
        if self.approver is None:
            return Decision.defer()
        context = ApprovalContext(
            goal=self.goal, run_id=self.run_id, step=self.step, verdict=verdict
        )
        try:
            decision = await self.approver.decide(request, context)
        except Exception as exc:  # a broken approver refuses; it never crashes the run
            return Decision.deny(f"the approver failed: {type(exc).__name__}: {exc}")
        if not isinstance(decision, Decision):
            return Decision.deny(f"the approver returned {type(decision).__name__}, not a Decision")
        return decision

    def record(
        self, access: Access, verdict: Verdict, decision: str, by: str, reason: str = ""
    ) -> None:
        """Add one trace row for the step in progress."""
        self.rows.append(
            PermissionRow(
                call_id=self.call_id,
                act=access.act.value,
                target=verdict.target,
                argv_json=json.dumps(list(access.argv)) if access.argv is not None else None,
                effect=verdict.effect.value,
                rule=str(verdict.rule) if verdict.rule is not None else None,
                layer=verdict.layer,
                decision=decision,
                decided_by=by,
                reason=reason,
                at=time.time(),
            )
        )

    def decision_on(self, call_id: str, act: Act, target: str) -> Decision | None:
        """What decided one act of a call, as a decision; ``None`` if it was not reached.

        A verdict of the policy reads as an approve (allowed) or a deny
        (refused), naming the rule.
        """
        settled = self.settled.get((call_id, act, target))
        if settled is None:  # the act's target changed since it was asked about
            settled = next(
                (v for (c, a, _), v in self.settled.items() if c == call_id and a is act), None
            )
        if settled is None or isinstance(settled, Decision):
            return settled
        if settled.effect is Effect.ALLOW:
            return Decision.approve(by=f"{_by(settled)}: {settled.describe()}")
        return Decision.deny(settled.describe(), by=_by(settled))

    def take_rows(self) -> list[PermissionRow]:
        """The rows recorded since the last call, handed over."""
        rows, self.rows = self.rows, []
        self.settled.clear()
        return rows

    def remembered_json(self) -> str:
        """The remembered rules as the store keeps them."""
        return json.dumps([r.model_dump(mode="json") for r in self.remembered])


def _by(verdict: Verdict) -> str:
    return REMEMBERED if verdict.layer == REMEMBERED else "policy"


def remembered_from_json(text: str | None) -> list[Rule]:
    """The remembered rules :meth:`Gate.remembered_json` wrote."""
    return [Rule.model_validate(item) for item in json.loads(text)] if text else []


def canonical_argv(argv: Sequence[str]) -> Access:
    """The exec act of a command: its program, with the whole argv recorded."""
    return Access(Act.EXEC, argv[0], tuple(argv))
