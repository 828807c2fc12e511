"""A run that stopped without success, given more and made to go on.

Continuing is a resume of a finished run: under its lease, its stored contract
takes the new budget (checked against what the run has spent), an optional user
turn is appended after its last step, and the run is running again, all in one
transaction; then it is prepared and driven as any resume is, from its last
commit. Nothing is repeated or reset: the conversation, spend, ledger, memory,
tree and effects journal go on. ``SUCCESS`` is final.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from io_harness.contract import Budget
from io_harness.errors import ConfigError, ResumeError
from io_harness.loop._events import event_row
from io_harness.loop._outcome import RunOutcome, RunResult
from io_harness.messages import Message
from io_harness.observe import RunContinued
from io_harness.prepare._reading import stored_contract
from io_harness.store import Store
from io_harness.store._records import StoredRun

if TYPE_CHECKING:
    from io_harness._harness import Harness

__all__ = ["More", "continue_stored", "continued", "wants_more"]


@dataclass(frozen=True, slots=True)
class More:
    """What a resume gives a run that has stopped: a budget replacing its own, a user turn."""

    budget: Budget | None = None
    message: str | None = None


_CAPS = {
    RunOutcome.STEP_CAP_REACHED: "its step cap",
    RunOutcome.TOKEN_BUDGET_EXCEEDED: "its token budget",
    RunOutcome.COST_BUDGET_EXCEEDED: "its cost budget",
}


def continue_stored(
    store: Store, stored: StoredRun, budget: Budget | None, message: str | None
) -> StoredRun:
    """``stored`` (finished) made to go on under ``budget`` (or the one it had), with
    ``message`` as a user turn; the run as the store now holds it. Under its lease."""
    outcome = RunOutcome(stored.outcome or "")  # the store admits only known outcomes
    if outcome is RunOutcome.SUCCESS:
        raise ResumeError(
            f"run {stored.id!r} succeeded, and success is final: start a new run for more work"
        )
    if message is not None and (not isinstance(message, str) or not message.strip()):
        raise ConfigError(f"message must be a non-empty string, not {message!r}")
    contract = stored_contract(stored)
    given = budget if budget is not None else contract.budget
    _check_room(stored, outcome, given, given_anew=budget is not None)
    # A continued run's wall time counts from now: what it spent before is added to it.
    spent = max(0.0, time.time() - stored.started_at)
    if given.max_wall_seconds is not None:
        given = given.model_copy(update={"max_wall_seconds": spent + given.max_wall_seconds})
    continued = contract.model_copy(update={"budget": given})
    said = Message.user(message) if message is not None else None
    event = RunContinued(
        run_id=stored.id,
        step=stored.steps,
        stopped=outcome.value,
        budget=given.model_dump(mode="json"),
        said=message,
        at=time.time(),
    )
    store.continue_run(stored.id, continued.model_dump_json(), said, event_row(event))
    return store.load_run(stored.id)


def wants_more(run_id: str, outcome: RunOutcome) -> str:
    """What a run stopped at one of its caps needs to go on, in words a caller acts on."""
    return (
        f"run {run_id!r} stopped at {_CAPS[outcome]}: continue it with more "
        "(continue_run(RUN_ID, budget=Budget(...)); ioh resume RUN_ID --add-steps N, "
        "--max-tokens N or --max-cost X)"
    )


def _check_room(stored: StoredRun, outcome: RunOutcome, budget: Budget, given_anew: bool) -> None:
    """Refuse a budget the run has spent already: it would stop again before a step."""
    spent = [
        (budget.max_steps, stored.steps, "max_steps", "steps taken"),
        (budget.max_tokens, stored.usage.total_tokens, "max_tokens", "tokens used"),
        (budget.max_cost_micros, stored.cost_micros, "max_cost", "spent (in micro-units)"),
    ]
    for limit, used, name, what in spent:
        if limit is None or limit > used:
            continue
        if not given_anew and outcome in _CAPS:
            raise ConfigError(wants_more(stored.id, outcome))
        shown = budget.max_cost if name == "max_cost" else limit
        raise ConfigError(
            f"run {stored.id!r} cannot go on under {name} = {shown}: it has {used} {what} "
            "already; give a budget above what is spent"
        )


async def continued(harness: Harness, run_id: str, more: More) -> RunResult:
    """:meth:`Harness.continue_run`: the checks on what it is given, then prepare → drive."""
    from io_harness.prepare._prepared import drive
    from io_harness.prepare._stored import prepared_stored

    if not isinstance(run_id, str) or not run_id:
        raise ConfigError(f"run_id must be a non-empty string, not {run_id!r}")
    if more.budget is not None and not isinstance(more.budget, Budget):
        raise ConfigError(f"budget must be a Budget, not {type(more.budget).__name__}")
    place = harness.store.load_run(run_id).tree
    if place is not None and place.root_id != run_id:
        raise ConfigError(
            f"run {run_id!r} is a sub-agent of {place.root_id!r}: it goes on as part of its "
            "tree; continue the tree's root"
        )
    async with prepared_stored(harness, run_id, None, False, more) as prepared:
        if isinstance(prepared, RunResult):  # only without ``more``
            return prepared
        return await drive(prepared)
