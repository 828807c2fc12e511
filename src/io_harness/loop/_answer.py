"""A step's first phase: the model's answer, asked within the budgets and the window.

The request is the run's view of the conversation (compacted when it would
pass its share of the context window) and its tools (a role's, composed
anew); the call's spend is counted and drawn on the tree's ledger. An answer
whose calls act is journaled before they run (``_journal``), so a step redone
after a crash or a pause finishes with it rather than ask the model again.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Literal

from io_harness.compaction._step import compact, past_share
from io_harness.loop._calls import Unanswered
from io_harness.loop._effects import FILE_TOOLS, acts_on_the_world, intent_for
from io_harness.loop._events import provider_calls
from io_harness.loop._outcome import RunOutcome
from io_harness.loop._progress import StepProgress
from io_harness.loop._state import StepContext
from io_harness.messages import CompletionRequest, CompletionResponse, Message, Usage
from io_harness.store._records import StepRecord

if TYPE_CHECKING:
    from io_harness.loop._engine import Engine

__all__ = ["answer", "charged_call", "request_of"]

_CHARS_PER_TOKEN = 4


async def answer(engine: Engine, ctx: StepContext) -> StepProgress | RunOutcome:
    """The model's answer for the step, or the outcome that ends the run instead."""
    if engine.mcp is not None and await engine.mcp.refresh():
        # A server announced a change (or was restarted): offer its tools as they are now.
        engine.toolbox = engine.toolbox.with_kind("mcp", engine.mcp.tools())
    request = request_of(engine, ctx)
    if past_share(engine, request):
        await compact(engine, ctx)
        request = request_of(engine, ctx)
    if not _can_afford(engine, request):
        return RunOutcome.COST_BUDGET_EXCEEDED
    answered = await charged_call(engine, ctx, request)
    if _overflowed(answered) and engine.kit.compaction is not None:
        # The provider says it does not fit: compact once, then try once more.
        await compact(engine, ctx)
        answered = await charged_call(engine, ctx, request_of(engine, ctx))
        if _overflowed(answered):
            assert isinstance(answered, Unanswered)
            engine.state.last_error = answered.error
            return RunOutcome.CONTEXT_EXHAUSTED
    if isinstance(answered, Unanswered):
        engine.state.last_error = answered.error
        return answered.outcome
    engine.state.last_input_tokens = answered.usage.input_tokens
    record = ctx.record
    progress = StepProgress(
        assistant=Message(role="assistant", content=answered.content),
        usage=answered.usage,
        finish_reason=answered.finish_reason,
        provider=record.attempts[-1].provider,
        cost_micros=record.cost_micros,
        unpriced=bool(record.unpriced_calls),
        started_at=record.started_at,
    )
    if any(acts_on_the_world(engine.toolbox, c) for c in progress.assistant.tool_calls):
        _journal(engine, ctx, progress)
        await engine.tell_committed()  # its attempts are stored now
    return progress


def request_of(engine: Engine, ctx: StepContext) -> CompletionRequest:
    """The next model call: the conversation as the model sees it (its compacted view),
    and the tools (a role's composed anew)."""
    from io_harness.loop._engine import MAX_OUTPUT_TOKENS

    messages = engine.state.viewed()
    tools = engine.toolbox.specs
    if engine.role is not None:
        ctx.composition = engine.role.compose(messages)
        tools = ctx.composition.specs
    return CompletionRequest.model_construct(
        model=engine.kit.provider.model,
        system=engine.prepared.stored.system_prompt,
        messages=messages,
        tools=tools,
        max_tokens=MAX_OUTPUT_TOKENS,
        temperature=None,
    )


async def charged_call(
    engine: Engine,
    ctx: StepContext,
    request: CompletionRequest,
    purpose: Literal["answer", "compaction"] = "answer",
) -> CompletionResponse | Unanswered:
    """One model call (its attempts into the step's record), its spend counted and drawn."""
    record = ctx.record
    first = len(record.attempts)
    answered = await engine.caller.call(request, record, ctx.events)
    made = record.attempts[first:]
    if engine.kit.observer is not None:
        engine.told += provider_calls(engine.run_id, record.step, made, request, answered, purpose)
    cost = engine.state.spend(made)
    if engine.node is not None and made:
        engine.node.draw(sum(a.usage.total_tokens for a in made), cost)
    return answered


def _can_afford(engine: Engine, request: CompletionRequest) -> bool:
    """Whether the cost budget can cover the least the next call will cost.

    The next prompt holds the last one, so it costs at least the last call's
    input tokens (at first, the prompt's characters / 4) at the cheapest
    input rate of the first provider to be asked.
    """
    max_cost = engine.contract.budget.max_cost_micros
    prices = engine.kit.prices
    if max_cost is None or prices is None:
        return True
    price = prices.price_for(engine.caller.members[0].model)
    if price is None:
        return True
    tokens = engine.state.last_input_tokens
    if tokens is None:
        tokens = len(request.model_dump_json()) // _CHARS_PER_TOKEN
    return engine.state.cost_micros + price.input_floor_micros(tokens) <= max_cost


def _journal(engine: Engine, ctx: StepContext, progress: StepProgress) -> None:
    """Commit the answer (its attempts and draws with it) before its calls act.

    A step redone after a crash or a pause then finishes with this answer,
    so the model is not paid twice, its spawns find the children they
    made, and its calls that acted are not repeated (see ``_effects.py``).
    """
    record = ctx.record
    ctx.journaling = True
    first = progress.assistant.tool_calls[0]
    if first.name in FILE_TOOLS:  # its intent rides with the answer: one commit less
        progress.intent = intent_for(engine.toolbox, first, engine.contract.root)
        ctx.stored_intent = first.id
    entry = StepRecord(
        step=record.step,
        started_at=record.started_at,
        finished_at=time.time(),
        attempts=record.attempts,
        tree_events=engine.node.take_rows() if engine.node is not None else [],
        journal_json=progress.model_dump_json(),
        compactions=record.compactions,
        extra_usage=record.extra_usage,
        numbered_on=record.numbered_on,
    )
    engine.kit.store.commit_step(engine.run_id, entry)
    progress.intent = None
    record.earlier_cost_micros += entry.cost_micros
    record.attempts, record.compactions, record.extra_usage = [], [], Usage()


def _overflowed(answered: CompletionResponse | Unanswered) -> bool:
    """Whether a call failed because the prompt does not fit the context window."""
    error = answered.error if isinstance(answered, Unanswered) else None
    return error is not None and error.kind == "context_overflow"
