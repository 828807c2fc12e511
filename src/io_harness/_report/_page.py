"""The report's content, ready for the template: each agent's summary, timeline and steps.

Everything here is data; the template decides how it looks. Text that came
from a run (goals, messages, arguments, outputs) is kept as it was stored and
escaped by the template.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from io_harness._report._gather import Agent, Gathered
from io_harness._report._steps import StepView, steps_of, task_text
from io_harness.messages import Usage
from io_harness.pricing import run_spend
from io_harness.store import RunSummary, Trace

__all__ = ["AgentView", "Page", "TimelineBar", "TreeRow", "page_of"]


@dataclass(frozen=True, slots=True)
class TimelineBar:
    """One step on the run's time axis, as shares of the run's span (0 to 100)."""

    step: StepView
    left: float
    width: float
    seconds: float | None
    tokens: int


@dataclass(frozen=True, slots=True)
class TreeRow:
    """One agent in the tree drawing: its depth and what its line says."""

    anchor: str
    depth: int
    run: RunSummary
    status: str
    spend: str


@dataclass(frozen=True, slots=True)
class AgentView:
    """One run of the report with everything its section shows."""

    anchor: str
    agent: Agent
    spend: str
    elapsed: str
    usage: Usage
    served: tuple[str, ...]
    """The models that answered, when they differ from the one asked for."""
    task: str
    contract: str | None
    """The stored contract as indented JSON."""
    criterion: str | None
    budget: str
    """The contract's budget: ``max_steps 30 · max_retries 2``."""
    constraints: tuple[str, ...]
    tools: tuple[str, ...]
    system_prompt: str | None
    error: str | None
    steps: tuple[StepView, ...]
    timeline: tuple[TimelineBar, ...]
    calls: dict[str, str]
    """Each tool call's card anchor by ``"step:call_id"``, for the tables that link to it."""
    parent: tuple[str, str] | None
    """The parent agent's (anchor, run id)."""

    @property
    def trace(self) -> Trace:
        """The agent's trace."""
        return self.agent.trace

    @property
    def run(self) -> RunSummary:
        """The agent's run as the store summarises it."""
        return self.agent.trace.run

    @property
    def checks(self) -> list[Any]:
        """Every check of the run, in order."""
        return [check for step in self.steps for check in step.checks]


@dataclass(frozen=True, slots=True)
class Page:
    """The whole report: the agents (the one asked for first) and, for a tree, its drawing."""

    title: str
    agents: tuple[AgentView, ...]
    tree: tuple[TreeRow, ...]
    root_id: str | None
    tree_total: str | None
    """The tree's totals (agents, tokens, spend) when the report is of its root."""
    version: str

    @property
    def head(self) -> AgentView:
        """The agent the report was asked for."""
        return self.agents[0]

    @property
    def damaged(self) -> list[AgentView]:
        """The agents whose trace was read with bad bytes replaced."""
        return [view for view in self.agents if view.agent.damaged]


def page_of(gathered: Gathered, version: str) -> Page:
    """The report of ``gathered``'s runs."""
    anchors = {agent.trace.run.id: f"a{index}" for index, agent in enumerate(gathered.agents)}
    children: dict[str, dict[str, tuple[str, str]]] = {}
    for agent in gathered.agents:
        node = agent.node
        if node is not None and node.parent_id is not None and node.spawn_call is not None:
            child = (anchors[node.run.id], node.run.id)
            children.setdefault(node.parent_id, {})[node.spawn_call] = child
    views = tuple(
        _agent_view(agent, anchors, children.get(agent.trace.run.id, {}))
        for agent in gathered.agents
    )
    head = gathered.agents[0]
    tree: tuple[TreeRow, ...] = ()
    total = None
    if gathered.is_tree:
        base = head.node.depth if head.node is not None else 0
        tree = tuple(
            TreeRow(
                view.anchor,
                (view.agent.node.depth if view.agent.node else 0) - base,
                view.run,
                view.agent.status,
                view.spend,
            )
            for view in views
        )
    if gathered.drawn is not None:
        tokens, cost = gathered.drawn
        unpriced = sum(view.run.unpriced_calls for view in views)
        agents = f"{len(views)} agent{'s' if len(views) != 1 else ''}"
        total = f"{agents}, {tokens:,} tokens, {run_spend(cost, unpriced, head.currency)}"
    return Page(
        title=f"ioh report: {head.trace.run.id}",
        agents=views,
        tree=tree,
        root_id=gathered.root_id,
        tree_total=total,
        version=version,
    )


def _agent_view(
    agent: Agent, anchors: dict[str, str], children: dict[str, tuple[str, str]]
) -> AgentView:
    trace, stored = agent.trace, agent.stored
    run = trace.run
    anchor = anchors[run.id]
    contract = _json_object(stored.contract_json) if stored is not None else {}
    single = contract.get("path") if contract.get("mode") == "file" else None
    steps = tuple(
        steps_of(
            trace,
            anchor,
            single_file=PurePath(single).name if isinstance(single, str) else None,
            children=children,
        )
    )
    served = {a.served_model for a in trace.provider_calls if a.served_model}
    node = agent.node
    parent = None
    if node is not None and node.parent_id is not None and node.parent_id in anchors:
        parent = (anchors[node.parent_id], node.parent_id)
    budget = contract.get("budget")
    return AgentView(
        anchor=anchor,
        agent=agent,
        spend=run_spend(run.cost_micros, run.unpriced_calls, agent.currency),
        elapsed=_elapsed(run),
        # The run's totals hold what its steps' rows do not: compaction passes' tokens.
        usage=stored.usage if stored is not None else sum((r.usage for r in trace.steps), Usage()),
        served=tuple(sorted(served - {run.model})),
        task=task_text(trace),
        contract=json.dumps(contract, indent=2, ensure_ascii=False) if contract else None,
        criterion=_criterion(trace, stored.verification_json if stored else None),
        budget=_budget(budget),
        constraints=tuple(str(c) for c in contract.get("constraints") or ()),
        tools=_tool_names(stored.tools_json if stored is not None else None),
        system_prompt=stored.system_prompt if stored is not None else None,
        error=_error(stored.error_json if stored is not None else None),
        steps=steps,
        timeline=_timeline(run, steps),
        calls={f"{c.row.step}:{c.row.call_id}": c.anchor for s in steps for c in s.calls},
        parent=parent,
    )


def _elapsed(run: RunSummary) -> str:
    if run.finished_at is None:
        return "not finished"
    return seconds(run.finished_at - run.started_at)


def seconds(value: float) -> str:
    """A duration as a person reads it: ``0.42 s``, ``12.3 s``, ``4 min 05 s``."""
    if value < 10:
        return f"{value:.2f} s"
    if value < 60:
        return f"{value:.1f} s"
    minutes, rest = divmod(round(value), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _timeline(run: RunSummary, steps: tuple[StepView, ...]) -> tuple[TimelineBar, ...]:
    timed = [s for s in steps if s.row is not None]
    if not timed:
        return ()
    start = min(run.started_at, *(s.row.started_at for s in timed if s.row))
    end = max(run.finished_at or 0.0, *(s.row.finished_at for s in timed if s.row))
    span = max(end - start, 1e-9)
    bars = []
    for one in steps:
        row = one.row
        if row is None:
            if one.number:  # a step begun and not committed (a failure, a deferral)
                bars.append(TimelineBar(one, 0.0, 0.0, None, 0))
            continue
        left = (row.started_at - start) / span * 100
        width = max((row.finished_at - row.started_at) / span * 100, 0.4)
        bars.append(
            TimelineBar(
                one,
                round(min(left, 99.6), 2),
                round(min(width, 100 - left), 2),
                row.finished_at - row.started_at,
                row.usage.total_tokens,
            )
        )
    return tuple(bars)


def _criterion(trace: Trace, verification_json: str | None) -> str | None:
    if trace.verifications:
        return trace.verifications[-1].criterion
    stored = _json_object(verification_json)
    criterion = stored.get("criterion")
    return criterion if isinstance(criterion, str) else None


def _budget(budget: object) -> str:
    if not isinstance(budget, dict):
        return ""
    return " · ".join(f"{k} {v}" for k, v in sorted(budget.items()) if v is not None)


def _tool_names(tools_json: str | None) -> tuple[str, ...]:
    try:
        specs = json.loads(tools_json) if tools_json else []
    except ValueError:
        return ()
    if not isinstance(specs, list):
        return ()
    return tuple(str(s.get("name")) for s in specs if isinstance(s, dict) and "name" in s)


def _error(error_json: str | None) -> str | None:
    if not error_json:
        return None
    value = _json_object(error_json)
    if not value:
        return error_json
    kind, message = value.get("kind"), value.get("message")
    if isinstance(message, str):
        return f"{kind}: {message}" if kind else message
    return json.dumps(value, ensure_ascii=False)


def _json_object(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
