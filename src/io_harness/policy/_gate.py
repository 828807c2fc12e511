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

__all__ = ["REMEMBERED", "Access", "Cleared", "Deferred", "Gate", "GateScope", "Refused"]

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


Settled = Decision | Verdict
"""What decided an act: the approver's decision, or the policy's verdict."""


@dataclass
class GateScope:
    """What the gate checked in one block: one call's acts (or the harness's own, call id
    ``""``) within one step. See :meth:`Gate.stepping` and :meth:`Gate.calling`."""

    call_id: str
    step: int
    rows: list[PermissionRow] = field(default_factory=list)
    """The trace rows recorded in the block; a call's hold its nested blocks' rows too (the
    harness's own connections it caused) once they end."""
    settled: dict[tuple[str, Act, str], Settled] = field(default_factory=dict)
    """What decided each act of the step, by call id, act and target: one mapping that the
    step's scope and its calls' scopes share."""
    closed: bool = False
    """The block has ended: what a task it started records later goes to the gate's rows
    outside any step, which the next step takes (nothing is dropped)."""

    def adopt(self, inner: GateScope) -> None:
        """Take the rows a block inside this one recorded (and what it settled), at its end."""
        self.rows.extend(inner.rows)
        if inner.settled is not self.settled:
            self.settled.update(inner.settled)


@dataclass
class Gate:
    """Checks acts against ``policy``, asks ``approver``, and keeps the trace rows.

    Without an approver, every ask is deferred: an unattended run stops and
    waits instead of guessing. Every act is checked and recorded in a scope:
    the engine opens one per step (:meth:`stepping`) and hands its rows to the
    step's transaction; each tool call runs in one of its own (:meth:`calling`),
    whose rows join the step's when it ends. Scopes are the task's (a context
    variable), so concurrent calls never see each other's. Acts checked
    outside any step (before the first: an MCP server's start) join the first.
    """

    policy: Policy
    approver: Approver | None = None
    goal: str = ""
    run_id: str = ""
    remembered: list[Rule] = field(default_factory=list)
    """The run's remembered rules, as a resume restores them; changed only by
    :meth:`remember`."""
    _remembered_changed: bool = field(default=False, repr=False)

    _outside: GateScope = field(default_factory=lambda: GateScope("", 0), repr=False)
    _scope: contextvars.ContextVar[GateScope | None] = field(
        default_factory=lambda: contextvars.ContextVar("ioh_gate_scope", default=None),
        repr=False,
    )

    @property
    def scope(self) -> GateScope:
        """The innermost scope of this task (the one outside every step, when none is open)."""
        return self._scope.get() or self._outside

    @property
    def call_id(self) -> str:
        """The tool call whose acts are being checked (``""``: the harness's own, such as the
        criterion's commands): the innermost :meth:`calling` block of this task."""
        return self.scope.call_id

    @property
    def step(self) -> int:
        """The step whose acts are being checked (0 before the first)."""
        return self.scope.step

    @contextlib.contextmanager
    def stepping(self, step: int) -> Iterator[GateScope]:
        """Check and record the acts of the block as step ``step``'s.

        The scope yielded holds the step's rows once the block ends: those its
        calls recorded, those recorded before it outside any step, and those of
        tasks that run outside every scope (an MCP server's own task) meanwhile.
        """
        scope = GateScope("", step)
        self._outside.step = step
        scope.adopt(self._drain_outside())
        try:
            with self._within(scope):
                yield scope
        finally:
            scope.adopt(self._drain_outside())
            scope.closed = True

    @contextlib.contextmanager
    def calling(self, call_id: str) -> Iterator[GateScope]:
        """Check and record the acts of the block as those of ``call_id``.

        What runs for the call, a connection of an MCP server's or a sandbox
        proxy's included, is recorded under it. The scope yielded holds the
        call's rows; when the block ends they join the enclosing scope's.
        """
        outer = self.scope
        scope = GateScope(call_id, outer.step, settled=outer.settled)
        try:
            with self._within(scope):
                yield scope
        finally:
            self._live(outer).adopt(scope)
            scope.closed = True

    def _live(self, scope: GateScope) -> GateScope:
        """``scope``, or the rows outside any step once it has ended (a task a call or a
        step started may go on after it: a sub-agent, an MCP server's own task)."""
        return self._outside if scope.closed else scope

    def _drain_outside(self) -> GateScope:
        drained, self._outside = self._outside, GateScope("", self._outside.step)
        return drained

    @contextlib.contextmanager
    def _within(self, scope: GateScope) -> Iterator[None]:
        token = self._scope.set(scope)
        try:
            yield
        finally:
            self._scope.reset(token)

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
            self.scope.settled[key] = verdict
            return Cleared(verdict)
        if verdict.effect is Effect.DENY:
            self.record(access, verdict, "refused", _by(verdict))
            self.scope.settled[key] = verdict
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
        self.scope.settled[key] = decision.model_copy(update={"by": by})
        self.record(access, verdict, "approved", by)
        self.remember(decision.remember)
        return Cleared(verdict, decision)

    def _denied(
        self, access: Access, verdict: Verdict, decision: Decision, asked: ApprovalRequest
    ) -> Refused:
        by = decision.by or (type(self.approver).__name__ if self.approver else "nobody")
        self.scope.settled[(self.call_id, verdict.act, verdict.target)] = decision.model_copy(
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
        """Add one trace row to the scope in progress."""
        self._live(self.scope).rows.append(
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
        """What decided one act of a call of this scope's, as a decision; ``None`` if it was
        not reached.

        A verdict of the policy reads as an approve (allowed) or a deny
        (refused), naming the rule.
        """
        decided = self.scope.settled
        settled = decided.get((call_id, act, target))
        if settled is None:  # the act's target changed since it was asked about
            settled = next(
                (v for (c, a, _), v in decided.items() if c == call_id and a is act), None
            )
        if settled is None or isinstance(settled, Decision):
            return settled
        if settled.effect is Effect.ALLOW:
            return Decision.approve(by=f"{_by(settled)}: {settled.describe()}")
        return Decision.deny(settled.describe(), by=_by(settled))

    def remember(self, rules: Sequence[Rule]) -> None:
        """Add ``rules`` to the run's remembered layer (a decision's ``remember``)."""
        if rules:
            self.remembered.extend(rules)
            self._remembered_changed = True

    def remembered_json(self) -> str:
        """The remembered rules as the store keeps them."""
        return json.dumps([r.model_dump(mode="json") for r in self.remembered])

    def take_remembered_change(self) -> str | None:
        """The remembered rules as the store keeps them, when they changed since last taken
        (a step's commit stores them); ``None`` when they did not."""
        if not self._remembered_changed:
            return None
        self._remembered_changed = False
        return self.remembered_json()


def _by(verdict: Verdict) -> str:
    return REMEMBERED if verdict.layer == REMEMBERED else "policy"


def remembered_from_json(text: str | None) -> list[Rule]:
    """The remembered rules :meth:`Gate.remembered_json` wrote."""
    return [Rule.model_validate(item) for item in json.loads(text)] if text else []


def canonical_argv(argv: Sequence[str]) -> Access:
    """The exec act of a command: its program, with the whole argv recorded."""
    return Access(Act.EXEC, argv[0], tuple(argv))
