"""An answer given to a run: checked against what the run awaits before anything is stored.

A question is a deferred request (``ApprovalRequest.question``), so an answer is
a :class:`Decision` of kind ``answer`` on it; one given to an act, an approval
given to a question, or an answer outside the question's choices is refused
here, naming what the run awaits.
"""

from __future__ import annotations

import shlex
import time

from io_harness.errors import ConfigError
from io_harness.policy._approval import ApprovalRequest, Decision
from io_harness.store._records import StoredRun
from io_harness.tools._ask import answer_problem

__all__ = ["check_fits", "not_awaiting", "unanswered", "with_answer"]


def with_answer(decision: Decision | None, answer: object, by: str) -> Decision | None:
    """``decision``, or the answer given instead of one (``resume(answer=...)``)."""
    if decision is not None and not isinstance(decision, Decision):
        raise ConfigError(f"decision must be a Decision, not {type(decision).__name__}")
    if answer is None:
        return decision
    if decision is not None:
        raise ConfigError("pass decision= or answer=, not both")
    if not isinstance(answer, str):
        raise ConfigError(f"answer must be text, not {type(answer).__name__}")
    return Decision.answered(answer, by=by)


def check_fits(run_id: str, request: ApprovalRequest, decision: Decision) -> None:
    """Refuse ``decision`` on ``request`` when it is not the kind the request takes."""
    if request.question is None:
        if decision.kind == "answer":
            raise ConfigError(
                f"run {run_id!r} awaits a decision on {request.describe()}, not an answer "
                "(ioh approve / ioh deny)"
            )
        return
    if decision.kind not in ("answer", "deny"):
        raise ConfigError(
            f"run {run_id!r} awaits an answer to {request.describe()}, not a decision: "
            "pass answer= (ioh answer RUN_ID TEXT)"
        )
    if decision.kind == "answer":
        problem = answer_problem(decision.answer, request.choices)
        if problem is not None:
            raise ConfigError(f"run {run_id!r} cannot take that answer: {problem}")


def not_awaiting(stored: StoredRun, decision: Decision) -> ConfigError:
    """The refusal of ``decision`` for a run that awaits nothing, saying its status."""
    status = stored.status
    if status == "finished" and stored.outcome is not None:
        status = f"finished: {stored.outcome}"
    taken = "an answer" if decision.kind == "answer" else "a decision"
    return ConfigError(f"run {stored.id!r} is not awaiting {taken} (it is {status}); it takes none")


def unanswered(
    stored: StoredRun, request: ApprovalRequest, answers: bool, wall: float | None
) -> None:
    """Refuse to resume a question without an answer, unless someone here can answer it or
    the run's wall budget has passed (the run then ends with the wall outcome)."""
    if answers or (wall is not None and time.time() >= stored.started_at + wall):
        return
    waits = f"run {stored.id!r} awaits an answer to {request.describe()} (request {request.id})"
    run = shlex.quote(stored.id)
    raise ConfigError(
        f"{waits}; pass answer= or give the harness an answerer",
        shell=f"{waits}; answer it with ioh answer {run} TEXT{{store}}",
    )
