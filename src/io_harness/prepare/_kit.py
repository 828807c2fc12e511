"""What every agent of one run's tree is driven with: the :class:`RunKit`.

A harness's options become one kit per start (a run, a resume): the
provider the contract's role calls for, the store, the observer, prices, the
approver, the sandbox chosen, the caller's tools, skills, memory, the root's
MCP sessions, compaction, the model's window and the retry policy. Every agent
of the tree (the root and each sub-agent) is prepared from it, so an option
reaches the loop by being added here once.
"""

from __future__ import annotations

from dataclasses import dataclass

from io_harness._mcp import McpSessions
from io_harness._retry import DEFAULT_RETRY, RetryPolicy
from io_harness.compaction import Compaction
from io_harness.contract import TaskContract
from io_harness.loop._context import system_prompt, task_message
from io_harness.loop._events import event_row, run_started
from io_harness.loop._sandboxing import RunSandbox
from io_harness.observe import Observer
from io_harness.policy._approval import Approver
from io_harness.policy._gate import Gate
from io_harness.prepare._setup import build_tools, memory_scope
from io_harness.pricing import PriceTable
from io_harness.providers import Provider
from io_harness.roles import Role, RunRole
from io_harness.store import Store
from io_harness.store._records import NewRun
from io_harness.tools import RunTools
from io_harness.tools._ask import ASK_USER, Answerer
from io_harness.tools._caller import Toolbox
from io_harness.tools._memory import memory_notes
from io_harness.tools._skills import Skill
from io_harness.trees import AgentNode

__all__ = ["RunKit"]


@dataclass(frozen=True)
class RunKit:
    """What every agent of one run's tree is driven with."""

    provider: Provider
    role: Role | None
    store: Store
    observer: Observer | None
    prices: PriceTable | None
    approver: Approver | None
    chosen: RunSandbox
    caller: Toolbox
    skills: tuple[Skill, ...]
    memory: bool
    setup_json: str
    sessions: McpSessions | None
    compaction: Compaction | None = None
    window: int | None = None
    """The model's context window, when compaction is on."""
    retry: RetryPolicy = DEFAULT_RETRY
    """How a model call's transient failures are retried."""
    answerer: Answerer | None = None
    """Who answers the model's questions at once (``ask_user``), if anyone."""
    ask: bool = False
    """Whether the run offers ``ask_user`` (the harness's ``ask=``, as its setup stores it)."""

    def tools(
        self,
        contract: TaskContract,
        gate: Gate,
        started_at: float,
        node: AgentNode | None,
        *,
        sweep: bool = True,
    ) -> RunTools:
        """An agent's tools: the run's built-ins and the caller's, the tree's ``spawn_agent``.

        ``sweep`` removes what writes cut short by a crash left in its workspace:
        a root's start and a resumed sub-agent's do; a new sub-agent's need not.
        """
        return build_tools(
            contract,
            gate,
            self.chosen,
            started_at,
            caller=self.caller,
            skills=self.skills,
            memory=self.store if self.memory else None,
            mcp=self.sessions,
            spawn=node.tool() if node is not None else None,
            ask=self.ask or ASK_USER in contract.tools,
            sweep=sweep,
            private=self.store.files(),
        )

    def new_run(
        self,
        run_id: str,
        contract: TaskContract,
        gate: Gate,
        tools: RunTools,
        started_at: float,
        **fields: object,
    ) -> NewRun:
        """The run as the store creates it: its prompt, tools, first message and setup."""
        store = self.store
        notes = memory_notes(store.memory_entries(memory_scope(contract))) if self.memory else None
        started = run_started(run_id, 0, contract, self.provider, resumed=False)
        names = tools.names
        role = self.run_role(contract, tools, gate)
        if role is not None:
            names = tuple(t.spec.name for t in role.compose(()).tools)
        prompt = system_prompt(contract, names, self.skills)
        return NewRun(
            id=run_id,
            goal=contract.goal,
            contract_json=contract.model_dump_json(),
            system_prompt=role.system_prompt(prompt) if role is not None else prompt,
            tools_json="[" + ",".join(s.model_dump_json() for s in tools.specs) + "]",
            provider=self.provider.name,
            model=self.provider.model,
            started_at=started_at,
            messages=(task_message(contract, notes),),
            events=(event_row(started),),
            policy_json=gate.policy.model_dump_json(),
            sandbox_json=self.chosen.record_json(),
            prices_json=self.prices.to_json() if self.prices is not None else None,
            setup_json=self.setup_json,
            **fields,  # type: ignore[arg-type]
        )

    def run_role(self, contract: TaskContract, tools: RunTools, gate: Gate) -> RunRole | None:
        """The role an agent of this kit works under (the root's; a sub-agent has none);
        its committed files are read only where the agent's policy lets them be read."""
        if self.role is None or contract.role != self.role.name:
            return None
        return RunRole.of(self.role, contract.root.resolve(), tools, gate.readable_quietly)
