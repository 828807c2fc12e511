"""A run's changing state, and one step's: what the engine changes as it drives.

:class:`RunState` is loaded from the store when a drive begins, changed as
each step commits, and turned into the :class:`RunResult`; nothing of it is
kept anywhere else. :class:`StepContext` is one step's: the record its
commit stores, the events it tells, and how far its journal has gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from io_harness.compaction._pass import Edit, View
from io_harness.errors import ProviderError
from io_harness.loop._outcome import RunOutcome, RunResult
from io_harness.loop._progress import Intent
from io_harness.messages import Message, Usage
from io_harness.observe import RunEvent
from io_harness.policy._approval import ApprovalRequest
from io_harness.policy._rules import Rule
from io_harness.roles import Composition
from io_harness.store._records import ProviderAttempt, StepRecord, StoredRun
from io_harness.verify import VerificationResult

__all__ = ["RunState", "StepContext"]


@dataclass
class RunState:
    """What a run has done so far: its steps, spend, conversation and last check."""

    run_id: str
    steps: int
    usage: Usage
    cost_micros: int
    unpriced_calls: int
    messages: list[Message]
    verification: VerificationResult | None
    view: View
    """The model's view of the conversation: the transcript under compaction's edits."""
    journal: str | None = None
    """A step's answer stored before its calls ran, not yet finished (a crash's)."""
    last_error: ProviderError | None = None
    last_input_tokens: int | None = None
    check_pending: bool = False
    """A change may be unchecked (a resumed run): the next step checks whatever happens."""

    @classmethod
    def load(cls, stored: StoredRun) -> RunState:
        """The state the store holds for ``stored``."""
        view = View(
            Edit("summary" if c.kind == "summary" else "delete", c.step, c.message, c.text)
            for c in stored.compactions
        )
        verification = (
            VerificationResult.model_validate_json(stored.verification_json)
            if stored.verification_json
            else None
        )
        return cls(
            run_id=stored.id,
            steps=stored.steps,
            usage=stored.usage,
            cost_micros=stored.cost_micros,
            unpriced_calls=stored.unpriced_calls,
            messages=list(stored.messages),
            verification=verification,
            view=view,
            journal=stored.journal_json,
        )

    def viewed(self) -> tuple[Message, ...]:
        """The conversation as the model is sent it: the transcript under the run's edits."""
        return tuple(self.view.apply(self.messages) if self.view.edits else self.messages)

    def spend(self, attempts: Sequence[ProviderAttempt]) -> int:
        """Count the spend of a model call's ``attempts``; its priced cost."""
        cost = sum(a.cost_micros or 0 for a in attempts)
        self.cost_micros += cost
        self.unpriced_calls += sum(1 for a in attempts if a.unpriced)
        return cost

    def committed(self, record: StepRecord) -> None:
        """Take in a step whose answer and results ``record`` holds."""
        self.messages.extend(record.messages)
        self.steps = record.step
        self.usage = self.usage + record.usage

    def result(
        self,
        outcome: RunOutcome,
        *,
        request: ApprovalRequest | None,
        remembered: tuple[Rule, ...],
        sandbox: str,
    ) -> RunResult:
        """The run's result as it ends (or pauses) with ``outcome``."""
        return RunResult(
            run_id=self.run_id,
            outcome=outcome,
            steps=self.steps,
            usage=self.usage,
            verification=self.verification,
            error=self.last_error,
            cost_micros=self.cost_micros,
            unpriced_calls=self.unpriced_calls,
            request=request,
            remembered=remembered,
            sandbox=sandbox,
        )


@dataclass
class StepContext:
    """One step in flight: its record, its events, its journal and its role's tools."""

    record: StepRecord
    events: list[RunEvent] = field(default_factory=list)
    journaling: bool = False
    """The step is journaled: each call's intent is stored before it acts."""
    stored_intent: str | None = None
    """The call whose intent went into the store with the step's answer."""
    cut_short: Intent | None = None
    """The intent of the call a crash cut short, read back with a journaled step."""
    finishing_deferred: bool = False
    """The step finishes a deferred act: its check gets its own timeout."""
    composition: Composition | None = None
    """The role's tools as the step's request composed them (its calls are limited to them)."""

    @property
    def step(self) -> int:
        """The step's number."""
        return self.record.step
