"""One compaction pass inside a step: the model marks and summarises, the checked edits
join the run's view.

The edits are committed with the step (its answer's journal, or the step
itself), beside the transcript, which is never rewritten.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from io_harness.compaction._pass import (
    apply_pass,
    compactor_request,
    deletable,
    estimate_tokens,
    protected,
)
from io_harness.messages import CompletionRequest
from io_harness.store._records import CompactionRow

if TYPE_CHECKING:
    from io_harness.loop._engine import Engine
    from io_harness.loop._state import StepContext

__all__ = ["compact", "past_share"]


def past_share(engine: Engine, request: CompletionRequest) -> bool:
    """Whether ``request`` would pass the compaction's share of the context window."""
    compaction, window = engine.kit.compaction, engine.kit.window
    if compaction is None or window is None:
        return False
    return estimate_tokens(request) > compaction.at_share * window


async def compact(engine: Engine, ctx: StepContext) -> None:
    """One compaction pass: its call charged to the step, its checked edits in the view.

    A pass that could leave nothing out (every message of the view is
    protected) is not made: it would cost a model call and free nothing.
    """
    from io_harness.loop._answer import charged_call
    from io_harness.loop._calls import Unanswered
    from io_harness.loop._engine import MAX_OUTPUT_TOKENS

    compaction = engine.kit.compaction
    assert compaction is not None
    state, record = engine.state, ctx.record
    guarded = protected(state.messages, state.view, compaction.keep_recent)
    if not deletable(state.messages, state.view, guarded):
        return
    request = compactor_request(
        engine.kit.provider.model,
        engine.contract.goal,
        state.messages,
        state.view,
        guarded,
        MAX_OUTPUT_TOKENS,
    )
    answered = await charged_call(engine, ctx, request, "compaction")
    if isinstance(answered, Unanswered):
        return  # the step's own call follows, and meets the same provider
    record.extra_usage = record.extra_usage + answered.usage
    state.usage = state.usage + answered.usage
    edits, _ = apply_pass(answered.tool_calls, state.messages, state.view, guarded, record.step)
    at = time.time()
    record.compactions += [CompactionRow(e.kind, e.step, e.message, e.text, at) for e in edits]
    state.view.add(edits)
