"""How a run ended: the outcome enum and the result ``run`` and ``resume`` return."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from decimal import Decimal

from io_harness.errors import ProviderError
from io_harness.messages import Usage
from io_harness.policy._approval import ApprovalRequest
from io_harness.policy._gate import remembered_from_json
from io_harness.policy._rules import Rule
from io_harness.pricing import MICROS
from io_harness.store._records import StoredRun
from io_harness.verify import VerificationResult

__all__ = ["RunOutcome", "RunResult"]


class RunOutcome(enum.StrEnum):
    """Why a run stopped. Only ``SUCCESS`` means the criterion passed."""

    SUCCESS = "success"
    STEP_CAP_REACHED = "step_cap_reached"
    TIME_BUDGET_EXCEEDED = "time_budget_exceeded"
    TOKEN_BUDGET_EXCEEDED = "token_budget_exceeded"
    COST_BUDGET_EXCEEDED = "cost_budget_exceeded"
    PROVIDER_FAILED = "provider_failed"
    CONTEXT_EXHAUSTED = "context_exhausted"
    """The conversation does not fit the model's context window, even compacted."""
    AWAITING_APPROVAL = "awaiting_approval"
    """Not an end: an approver deferred an act; ``resume`` with a decision continues."""
    AWAITING_ANSWER = "awaiting_answer"
    """Not an end: the model asked the person a question (``ask_user``); ``resume`` with
    ``answer=`` continues, the answer the question's result."""

    @property
    def awaits(self) -> bool:
        """Whether the run is paused (for a decision or an answer), not ended."""
        return self in (RunOutcome.AWAITING_APPROVAL, RunOutcome.AWAITING_ANSWER)


@dataclass(frozen=True, slots=True)
class RunResult:
    """The end of a run, as stored.

    ``verification`` is the last check of the criterion (``None`` if it never
    ran); ``error`` is the provider failure that ended a ``PROVIDER_FAILED``
    run, or the last one before a budget stopped retries.
    """

    run_id: str
    outcome: RunOutcome
    steps: int
    usage: Usage
    verification: VerificationResult | None = None
    error: ProviderError | None = None
    cost_micros: int = 0
    """Priced spend in micro-units of the price table's currency."""
    unpriced_calls: int = 0
    """Answered model calls whose model had no price: spend not in ``cost_micros``."""
    request: ApprovalRequest | None = None
    """The deferred act an ``AWAITING_APPROVAL`` run waits on (the question, for
    ``AWAITING_ANSWER``: ``request.question``, ``request.choices``)."""
    remembered: tuple[Rule, ...] = ()
    """The rules approvers asked the run to remember, oldest first."""
    sandbox: str | None = None
    """The sandbox backend the run's commands ran in (``"none"``: directly, uncontained);
    ``None`` for a run stored before sandboxes were recorded."""

    @property
    def request_id(self) -> str | None:
        """The id of the deferred act an ``AWAITING_APPROVAL`` run waits on."""
        return self.request.id if self.request is not None else None

    @property
    def cost(self) -> Decimal:
        """Priced spend in units of the price table's currency."""
        return Decimal(self.cost_micros) / MICROS

    @property
    def succeeded(self) -> bool:
        """Whether the criterion passed."""
        return self.outcome is RunOutcome.SUCCESS

    @classmethod
    def from_stored(cls, run: StoredRun) -> RunResult:
        """The result of a finished run, read back from the store."""
        assert run.outcome is not None
        verification = (
            VerificationResult.model_validate_json(run.verification_json)
            if run.verification_json
            else None
        )
        return cls(
            run_id=run.id,
            outcome=RunOutcome(run.outcome),
            steps=run.steps,
            usage=run.usage,
            verification=verification,
            error=ProviderError.from_dict(json.loads(run.error_json)) if run.error_json else None,
            cost_micros=run.cost_micros,
            unpriced_calls=run.unpriced_calls,
            remembered=tuple(remembered_from_json(run.remembered_json)),
            sandbox=stored_backend(run.sandbox_json),
        )


def stored_backend(sandbox_json: str | None) -> str | None:
    """The backend named in a run's stored sandbox record."""
    try:
        backend = json.loads(sandbox_json).get("backend") if sandbox_json else None
    except (ValueError, AttributeError):
        return None
    return backend if isinstance(backend, str) else None
