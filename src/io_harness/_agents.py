"""The agents of one tree: how the harness creates a sub-agent's run and drives any of them.

A run whose harness has a :class:`~io_harness.Containment` is the root of a
tree. :class:`AgentKit` holds what every agent of it is driven with (the
provider, the store, the caller's tools, skills, memory, the root's MCP
sessions, the sandbox) and is the tree's :class:`~io_harness.trees.TreeDriver`:
it stores a child's run when its parent spawns it, and drives a stored
agent, new or part-done, as a resume does: from what the store holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from io_harness._mcp import McpSessions
from io_harness._net import RunNet, checking
from io_harness.compaction._settings import Compaction
from io_harness.contract import TaskContract
from io_harness.errors import ConfigError
from io_harness.loop import Engine, RunResult, RunSandbox, build_tools, memory_scope
from io_harness.loop._context import system_prompt, task_message
from io_harness.loop._deferral import Resumption, stored_model
from io_harness.loop._events import event_row, run_started
from io_harness.loop._outcome import RunOutcome
from io_harness.loop._resuming import decision_for, stored_contract, stored_gate
from io_harness.observe import Observer
from io_harness.policy._approval import ApprovalRequest, Approver
from io_harness.policy._gate import Gate
from io_harness.pricing import PriceTable
from io_harness.providers import Provider
from io_harness.roles import Role
from io_harness.roles._run import RunRole
from io_harness.store import Store
from io_harness.store._records import NewRun, StoredRun
from io_harness.tools import RunTools
from io_harness.tools._caller import Toolbox
from io_harness.tools._memory import memory_notes
from io_harness.tools._skills import Skill
from io_harness.trees import AgentNode, ChildSpec, Tree

__all__ = ["AgentKit"]


@dataclass
class AgentKit:
    """What every agent of one run's tree is driven with; the tree's driver."""

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
    tree: Tree | None = None

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

    def engine(
        self,
        contract: TaskContract,
        tools: RunTools,
        stored: StoredRun,
        gate: Gate,
        node: AgentNode | None,
        *,
        owns_sessions: bool,
    ) -> Engine:
        """The engine of one agent; only the root's closes the MCP sessions."""
        return Engine(
            contract,
            self.provider,
            self.store,
            tools,
            stored,
            self.observer,
            self.prices,
            gate,
            self.chosen,
            self.sessions if owns_sessions else None,
            node,
            self.run_role(contract, tools, gate),
            self.compaction,
            self.window,
        )

    # -- the tree's driver ---------------------------------------------------------

    def create_child(self, spec: ChildSpec) -> None:
        """Store a spawned child's run, its parent's ``spawn`` row in the same transaction."""
        import time

        assert self.tree is not None
        gate = Gate(spec.policy, self.approver, goal=spec.contract.goal, run_id=spec.run_id)
        node = self.tree.node(spec.run_id, spec.place.depth, spec.contract, gate)
        started_at = time.time()
        tools = self.tools(spec.contract, gate, started_at, node, sweep=False)
        self.store.create_run(
            self.new_run(
                spec.run_id,
                spec.contract,
                gate,
                tools,
                started_at,
                tree=spec.place,
                tree_events=(spec.spawn_row,),
            )
        )

    async def drive_child(self, run_id: str, parent: AgentNode) -> RunResult:
        """Drive the stored sub-agent ``run_id``: start it, or go on from its last commit.

        A finished child gives its stored result; one awaiting a decision that
        nobody here can give (no approver, none stored) gives its pause.
        """
        assert self.tree is not None
        store = self.store
        with store.lease(run_id):
            stored = store.load_run(run_id)
            if stored.status == "finished":
                return RunResult.from_stored(stored)
            contract = stored_contract(stored)
            gate, _ = stored_gate(stored, contract, self.approver, None, False)
            try:
                decision = decision_for(stored, gate, None)
            except ConfigError:  # it awaits a decision and nobody here can give it
                return awaiting(stored)
            assert stored.tree is not None
            node = self.tree.node(run_id, stored.tree.depth, contract, gate)
            resumed = bool(stored.steps or stored.journal_json or stored.pending)
            tools = self.tools(contract, gate, stored.started_at, node, sweep=resumed)
            engine = self.engine(contract, tools, stored, gate, node, owns_sessions=False)
            # The child's own connections are decided and recorded by its own gate.
            with checking(RunNet.of(gate, self.provider)):
                return await engine.drive(
                    resumed=resumed, resumption=Resumption(stored.pending, decision)
                )


def awaiting(stored: StoredRun) -> RunResult:
    """The result of a run paused for a decision on the action it awaits."""
    assert stored.pending is not None
    request = stored_model(ApprovalRequest, stored.pending.request_json, "a request", stored.id)
    return RunResult(
        run_id=stored.id,
        outcome=RunOutcome.AWAITING_APPROVAL,
        steps=stored.steps,
        usage=stored.usage,
        cost_micros=stored.cost_micros,
        unpriced_calls=stored.unpriced_calls,
        request=request,
    )
