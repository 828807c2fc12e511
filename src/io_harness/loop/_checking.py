"""The criterion's check within a step: allowed outright, run in the sandbox, recorded.

A check that breaks fails; it never passes or crashes the run. Its commands
are checked by the gate each time (a remembered deny since the run began
fails it closed), and a failing check at the end of a turn becomes the
model's next message.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from io_harness.errors import RefusedError
from io_harness.loop._context import failing_check_message
from io_harness.loop._sandboxing import event_rows
from io_harness.loop._state import StepContext
from io_harness.observe import Trigger, Verified
from io_harness.policy._gate import canonical_argv
from io_harness.policy._rules import Effect
from io_harness.store._records import VerificationRow
from io_harness.verify import VerificationResult

if TYPE_CHECKING:
    from io_harness.loop._engine import Engine

__all__ = ["verify"]


async def verify(engine: Engine, ctx: StepContext, trigger: Trigger) -> bool:
    """Check the criterion now, recording the check in the step; whether it passed."""
    deadline = None
    if engine.wall_end is not None and not ctx.finishing_deferred:
        deadline = time.monotonic() + (engine.wall_end - time.time())
    engine.state.check_pending = False
    started, begun = time.monotonic(), time.time()
    criterion = engine.contract.verify
    refused = [
        verdict
        for argv in criterion.commands()
        if (verdict := engine.gate.check_outright(canonical_argv(argv))).effect is not Effect.ALLOW
    ]
    subject = engine.contract.subject(deadline, engine.kit.chosen.sandbox)
    try:
        if refused:  # a remembered deny since the run began: the check fails closed
            raise RefusedError(f"the policy refuses the check: {refused[0].describe()}")
        result = await criterion.check(subject)
    except Exception as exc:  # a check that breaks fails; it never passes or crashes
        result = VerificationResult(
            passed=False,
            criterion=criterion.describe(),
            output=f"the check could not run: {type(exc).__name__}: {exc}",
        )
    record = ctx.record
    record.sandbox_events.extend(event_rows("", subject.events))
    checked = VerificationRow(
        trigger=trigger,
        passed=result.passed,
        criterion=result.criterion,
        summary=result.summary,
        result_json=result.model_dump_json(),
        duration=time.monotonic() - started,
    )
    record.verifications.append(checked)
    engine.state.verification = result
    ctx.events.append(
        Verified(
            run_id=engine.run_id,
            step=record.step,
            trigger=trigger,
            passed=result.passed,
            criterion=result.criterion,
            summary=result.summary,
            output=result.output,
            started_at=begun,
            duration=checked.duration,
        )
    )
    if not result.passed and trigger == "turn_ended":
        record.messages.append(failing_check_message(result))
    return result.passed
