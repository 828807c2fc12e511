"""What ``ioh``'s commands print as a run ends: its closing lines, and its spend.

The other views are modules of their own: the runs listing
(``_runs_listing.py``), a run's trace (``_show.py``, with the model's view in
``_model_view.py``) and live progress (``_live.py``).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from rich.console import RenderableType

from io_harness.cli._answer import asked_line
from io_harness.cli._brief import count, outcome_style
from io_harness.cli._text import Hanging, escape, shown
from io_harness.loop import RunOutcome, RunResult
from io_harness.pricing import format_money, run_spend

__all__ = [
    "Money",
    "render_result",
    "spend",
]


def spend(cost_micros: int, unpriced_calls: int) -> str:
    """Priced spend, and how many calls it leaves out because they had no price."""
    if unpriced_calls and not cost_micros:
        return f"unpriced ({unpriced_calls} call{'s' if unpriced_calls != 1 else ''})"
    text = format_money(cost_micros)
    if not unpriced_calls:
        return text
    return f"{text} + {count(unpriced_calls, 'unpriced call', 'unpriced calls')}"


@dataclass(frozen=True, slots=True)
class Money:
    """What a run's spend is counted in: its price table's currency (``None``: the run has
    no price table), and its cost budget in micro-units (``None``: it has none)."""

    currency: str | None = None
    max_cost_micros: int | None = None


def render_result(result: RunResult, store_hint: str, money: Money | None = None) -> RenderableType:
    """The closing lines of ``ioh run``, ``ioh resume`` and ``ioh demo``.

    ``money`` is the run's currency and cost budget: the spend is shown in the
    one, and a run stopped by the other says why.
    """
    money = money or Money()
    lines = [
        f"outcome: {outcome_style(result.outcome.value)} after "
        f"{count(result.steps, 'step', 'steps')}, "
        f"{count(result.usage.total_tokens, 'token', 'tokens')}"
    ]
    stopped = _cost_stop(result, money)
    if stopped:
        lines.append(f"[red]stopped:[/] {escape(stopped)}")
    if result.verification is not None:
        verdict = "verified" if result.verification.passed else "not verified"
        criterion = escape((shown(result.verification.criterion).splitlines() or [""])[0])
        lines.append(f"{verdict}: {criterion}")
    if result.error is not None:
        lines.append(f"[red]provider error:[/] {escape(str(result.error))}")
    if result.cost_micros or result.unpriced_calls or money.currency is not None:
        said = run_spend(result.cost_micros, result.unpriced_calls, money.currency)
        lines.append(f"spend: {escape(said)}")
    if result.sandbox == "none":
        lines.append("[yellow]commands ran without a sandbox[/]")
    elif result.sandbox is not None:
        lines.append(f"commands ran in the sandbox: {escape(result.sandbox)}")
    if result.request is not None and result.request.question is not None:
        lines.append(asked_line(result.request, result.run_id, store_hint))
    elif result.request is not None:
        run_id = escape(shlex.quote(result.run_id)) + escape(store_hint)
        lines.append(
            f"[yellow]awaiting approval:[/] {escape(result.request.describe(), one_line=True)}\n"
            f"decide: ioh approve {run_id} [--remember] | ioh deny {run_id} --reason TEXT"
            " (ioh pending shows the diff)"
        )
    going_on = _going_on(result)
    if going_on:
        run_id = escape(shlex.quote(result.run_id)) + escape(store_hint)
        lines.append(f"continue it: ioh resume {run_id}{going_on}")
    lines.append(f"trace: ioh show {escape(shlex.quote(result.run_id))}{escape(store_hint)}")
    return Hanging("\n".join(lines))


_MORE = {
    RunOutcome.STEP_CAP_REACHED: " --add-steps N",
    RunOutcome.TOKEN_BUDGET_EXCEEDED: " --max-tokens N",
    RunOutcome.COST_BUDGET_EXCEEDED: " --max-cost X",
    RunOutcome.TIME_BUDGET_EXCEEDED: " --wall SECONDS",
}
"""What a run stopped at a cap is given to go on."""


def _going_on(result: RunResult) -> str | None:
    """The arguments ``ioh resume`` continues a stopped run with ("" for none); ``None`` for
    a run that succeeded or has not stopped."""
    if result.outcome is RunOutcome.SUCCESS or result.outcome.awaits:
        return None
    return _MORE.get(result.outcome, "") + " [--say TEXT]"


def _cost_stop(result: RunResult, money: Money) -> str:
    """Why a run stopped on its cost budget: spent, or too small for the call it would make.

    The loop stops before a call the budget cannot cover: its prompt's tokens at
    the model's cheapest input price already cost more than what is left.
    """
    budget = money.max_cost_micros
    if result.outcome is not RunOutcome.COST_BUDGET_EXCEEDED or budget is None:
        return ""
    limit = format_money(budget, money.currency or "")
    if result.cost_micros >= budget:
        return f"the cost budget of {limit} is spent"
    if result.steps == 0 and not result.cost_micros:
        return (
            f"the cost budget of {limit} could not cover the least the first call would cost "
            "(its prompt at the model's cheapest input price), so no call was made"
        )
    spent = format_money(result.cost_micros, money.currency or "")
    return (
        f"what is left of the cost budget of {limit} ({spent} spent) could not cover the "
        "least the next call would cost"
    )
