"""Sub-agent trees: the containment a tree lives within, its one ledger, and ``spawn_agent``.

A harness given a :class:`Containment` offers every agent of its runs the
``spawn_agent`` tool. Each agent is a run in the store; a child names its
parent, its depth and the spawn call, and works in its parent's workspace
(or a private copy of it) under its parent's policy narrowed further.

The spawn call only starts the child: the calls of one turn go on, so
several spawns of a turn run at once (up to ``max_concurrent_agents``,
tree-wide), and the turn waits for them all before its results go back to
the model, in spawn order. A spawn looks for the child its call made
already (a step redone after a crash), so a child is created once and
resumed, never started twice. Every provider call of every agent draws on
the tree's :class:`Ledger`, whose draws are committed with the calls they
paid for: a resumed tree's ledger is the sum of its committed draws.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import ConfigDict, Field, ValidationError, field_validator

from io_harness._confined import PathRefused
from io_harness._validation import CheckedModel, describe_validation, loading
from io_harness.contract import Budget, TaskContract
from io_harness.errors import HarnessError, ResumeError, StorageError
from io_harness.loop._isolate import BroughtBack, Snapshot, bring_back, isolate
from io_harness.loop._outcome import RunOutcome, RunResult
from io_harness.loop._progress import DoneCall
from io_harness.policy._approval import ApprovalRequest
from io_harness.policy._gate import Access, Gate, canonical_argv
from io_harness.policy._policy import Policy
from io_harness.policy._rules import Act, Effect
from io_harness.pricing import format_money
from io_harness.store import Store
from io_harness.store._records import TreeEventRow, TreePlace
from io_harness.tools._base import Args, HarnessTool, ToolFailure, ToolOutcome

if TYPE_CHECKING:
    from io_harness.loop._progress import StepProgress

__all__ = [
    "SPAWN_TOOL",
    "AgentNode",
    "ChildSpec",
    "Containment",
    "Ledger",
    "SpawnCap",
    "SpawnTool",
    "Tree",
    "TreeDriver",
]

SPAWN_TOOL = "spawn_agent"
SpawnCap = Literal["depth", "agents", "tokens", "cost", "wall"]
"""The cap that refused a spawn, as the observation and the ``refuse`` row name it."""
_LAST_WORDS = 2000
_FEEDBACK = 2000


class Containment(CheckedModel):
    """What a whole tree of agents may use, however its agents' contracts are written.

    Given as ``Harness(containment=...)``: every agent is then offered
    ``spawn_agent``. ``max_depth`` is how deep the tree may grow (the root is
    depth 0; 1 lets the root spawn children but not grandchildren);
    ``max_total_agents`` counts every agent of the tree, the root included;
    ``max_concurrent_agents`` is how many sub-agents run at once, tree-wide.
    ``max_total_tokens``, ``max_total_cost`` (in the run's price table's
    currency) and ``max_total_wall_seconds`` (from the root's start) bound
    the tree as a whole: every provider call of every agent draws on them,
    an agent past one ends with the matching budget outcome, and a spawn
    past one is refused.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_depth: int = Field(2, ge=1)
    max_total_agents: int = Field(10, ge=1)
    max_concurrent_agents: int = Field(4, ge=1)
    max_total_tokens: int | None = Field(None, ge=1)
    max_total_cost: Decimal | None = Field(None, gt=0)
    max_total_wall_seconds: float | None = Field(None, gt=0)

    @field_validator("max_total_cost", mode="before")
    @classmethod
    def _exact(cls, value: object) -> object:
        return Decimal(repr(value)) if isinstance(value, float) else value

    @property
    def max_total_cost_micros(self) -> int | None:
        """``max_total_cost`` in micro-units, rounded down."""
        if self.max_total_cost is None:
            return None
        return int(self.max_total_cost * 1_000_000)


class Ledger:
    """One tree's account, in this process: agents, tokens, money, the wall clock, the slots.

    Asyncio runs one agent's code at a time, so each draw and each check is
    atomic.
    """

    def __init__(
        self,
        containment: Containment,
        started_at: float,
        *,
        agents: int = 1,
        tokens: int = 0,
        cost_micros: int = 0,
    ) -> None:
        self.containment = containment
        self.agents = agents
        self.tokens = tokens
        self.cost_micros = cost_micros
        wall = containment.max_total_wall_seconds
        self.wall_end = started_at + wall if wall is not None else None
        self._slots = asyncio.Semaphore(containment.max_concurrent_agents)

    @classmethod
    def restored(cls, containment: Containment, store: Store, root_id: str) -> Ledger:
        """The ledger of a stored tree: its agents, and the sum of its committed draws."""
        nodes = store.tree(root_id)
        tokens, cost = store.tree_drawn(root_id)
        started = nodes[0].run.started_at if nodes else time.time()
        return cls(containment, started, agents=max(len(nodes), 1), tokens=tokens, cost_micros=cost)

    def exhausted(self) -> SpawnCap | None:
        """The tree-wide budget that is spent, if one is."""
        c = self.containment
        if c.max_total_tokens is not None and self.tokens >= c.max_total_tokens:
            return "tokens"
        max_cost = c.max_total_cost_micros
        if max_cost is not None and self.cost_micros >= max_cost:
            return "cost"
        if self.wall_end is not None and time.time() >= self.wall_end:
            return "wall"
        return None

    def refusal(self, depth: int) -> tuple[SpawnCap, str] | None:
        """Why a child at ``depth`` may not be spawned now, naming the cap; ``None``: it may."""
        c = self.containment
        if depth > c.max_depth:
            return "depth", f"a child would be at depth {depth}, past max_depth {c.max_depth}"
        if self.agents >= c.max_total_agents:
            return "agents", (
                f"the tree holds {self.agents} agents, max_total_agents {c.max_total_agents}"
            )
        spent = self.exhausted()
        if spent == "tokens":
            return "tokens", (
                f"the tree has used {self.tokens} tokens of max_total_tokens {c.max_total_tokens}"
            )
        if spent == "cost":
            return "cost", (
                f"the tree has spent {format_money(self.cost_micros)} of max_total_cost "
                f"{c.max_total_cost}"
            )
        if spent == "wall":
            return (
                "wall",
                f"the tree's max_total_wall_seconds ({c.max_total_wall_seconds:g}) ran out",
            )
        return None

    def draw(self, tokens: int, cost_micros: int) -> dict[str, int]:
        """Take one provider call's tokens and cost; the ``draw`` row's detail."""
        self.tokens += tokens
        self.cost_micros += cost_micros
        return {
            "tokens": tokens,
            "cost_micros": cost_micros,
            "tree_tokens": self.tokens,
            "tree_cost_micros": self.cost_micros,
        }

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Run one sub-agent: wait for a free slot, hold it while the block runs."""
        async with self._slots:
            yield


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """A child to create: its id, contract, policy and place; its parent's ``spawn`` row."""

    run_id: str
    contract: TaskContract
    policy: Policy
    place: TreePlace
    spawn_row: TreeEventRow


class TreeDriver(Protocol):
    """What the harness does for a tree: create a child run, and drive any agent of it."""

    def create_child(self, spec: ChildSpec) -> None:
        """Store the child's run, its ``spawn`` row with it."""
        ...

    async def drive_child(self, run_id: str, parent: AgentNode) -> RunResult:
        """Drive the stored agent ``run_id`` (new or part-done) to an outcome or a pause."""
        ...


@dataclass
class Tree:
    """What every agent of one tree shares in this process."""

    root_id: str
    containment: Containment
    ledger: Ledger
    store: Store
    driver: TreeDriver
    currency: str = ""
    """The price table's currency, for the spend in a child's report."""
    copies: list[Path] = field(default_factory=list)
    """Isolated copies made for children, removed when the tree ends."""

    def node(self, run_id: str, depth: int, contract: TaskContract, gate: Gate) -> AgentNode:
        """The agent ``run_id`` as its engine sees the tree."""
        return AgentNode(self, run_id, depth, contract, gate)

    def remove_copies(self) -> None:
        """Remove the isolated copies of finished children (a conflict's copy is kept)."""
        for copy in self.copies:
            # The copy's own private folder goes with it (an older run's copy sat in /tmp).
            holder = copy.parent if copy.parent.name.startswith(_COPY_PREFIX) else copy
            shutil.rmtree(holder, ignore_errors=True)
        self.copies.clear()


class SpawnArgs(Args):
    """``spawn_agent``'s arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)

    goal: str = Field(min_length=1, description="What the sub-agent is to achieve.")
    verify: dict[str, Any] = Field(
        description=(
            "How its work is checked, as in a contract: "
            '{"kind": "workspace_file_contains", "file": "a.txt", "needle": "text"}, '
            '{"kind": "command", "argv": ["python", "-m", "pytest", "-q"]}, '
            '{"kind": "pytest", "test_src": "def test_x(): ..."}'
        )
    )
    max_steps: int | None = Field(None, ge=1, description="Its step budget.")
    deny_write: list[str] = Field(default_factory=list, description="Paths it may not write.")
    deny_exec: list[str] = Field(default_factory=list, description="Programs it may not run.")
    deny_net: list[str] = Field(default_factory=list, description="Hosts it may not reach.")
    isolate: bool = Field(
        False,
        description=(
            "Work in a private copy of the workspace; its changed files come back when "
            "yours have not changed since."
        ),
    )


class SpawnTool(HarnessTool[SpawnArgs]):
    """``spawn_agent``: hand part of the task to a sub-agent; its result is the observation."""

    name = SPAWN_TOOL
    description = (
        "Hand part of the task to a sub-agent that works in the same workspace under your "
        "policy (narrowed further by deny_write, deny_exec and deny_net) until its criterion "
        "passes. Several spawns in one turn run at once; each result (outcome, steps, tokens, "
        "cost, the files it wrote, its last words, the check's feedback if it failed) comes "
        "back in the next turn, in spawn order."
    )
    args = SpawnArgs

    def __init__(self, node: AgentNode) -> None:
        self.node = node

    async def invoke(self, args: SpawnArgs) -> ToolOutcome:
        """Start (or find again) the child; the observation is filled in when the turn ends."""
        return await self.node.spawn(args)


@dataclass
class _Spawned:
    run_id: str
    task: asyncio.Task[RunResult]
    goal: str


class AgentNode:
    """One agent of a tree, as its engine sees it: its place and its spawns in flight."""

    def __init__(
        self, tree: Tree, run_id: str, depth: int, contract: TaskContract, gate: Gate
    ) -> None:
        self.tree = tree
        self.run_id = run_id
        self.depth = depth
        self.contract = contract
        self.gate = gate
        self._spawned: dict[str, _Spawned] = {}
        self._rows: list[TreeEventRow] = []

    # -- what the engine asks ------------------------------------------------------

    def tool(self) -> SpawnTool:
        """This agent's ``spawn_agent``."""
        return SpawnTool(self)

    def take_rows(self) -> list[TreeEventRow]:
        """The tree rows this agent made since last asked (refused spawns, draws)."""
        rows, self._rows = self._rows, []
        return rows

    def draw(self, tokens: int, cost_micros: int) -> None:
        """One provider call of this agent, drawn on the tree's ledger and kept as a row."""
        detail = self.tree.ledger.draw(tokens, cost_micros)
        self._rows.append(TreeEventRow("draw", json.dumps(detail), time.time()))

    def exhausted(self) -> RunOutcome | None:
        """The budget outcome this agent ends with when the tree's ledger is spent."""
        spent = self.tree.ledger.exhausted()
        if spent is None:
            return None
        return {
            "tokens": RunOutcome.TOKEN_BUDGET_EXCEEDED,
            "cost": RunOutcome.COST_BUDGET_EXCEEDED,
            "wall": RunOutcome.TIME_BUDGET_EXCEEDED,
        }[spent]

    async def settle(self, done: Sequence[DoneCall]) -> list[DoneCall] | ApprovalRequest:
        """Wait for this turn's children; their results in place of the spawn calls' stand-ins.

        A child that paused for approval pauses this agent too: its request
        is returned (the first, in spawn order), and every other child of the
        turn has ended or paused first.
        """
        spawned, self._spawned = self._spawned, {}
        if not spawned:
            return list(done)
        try:
            results = await asyncio.gather(
                *(s.task for s in spawned.values()), return_exceptions=True
            )
        finally:
            for s in spawned.values():
                s.task.cancel()
        outcomes = dict(zip(spawned, results, strict=True))
        for result in outcomes.values():
            if isinstance(result, RunResult) and result.outcome is RunOutcome.AWAITING_APPROVAL:
                assert result.request is not None
                return result.request
        settled = []
        for call in done:
            if call.call_id not in spawned:
                settled.append(call)
                continue
            text, is_error, changed = self._report(spawned[call.call_id], outcomes[call.call_id])
            settled.append(
                call.model_copy(update={"result": text, "is_error": is_error, "changed": changed})
            )
        return settled

    def abandon(self) -> None:
        """Cancel the children still in flight (the agent is ending mid-turn)."""
        for s in self._spawned.values():
            s.task.cancel()
        self._spawned.clear()

    # -- spawning ------------------------------------------------------------------

    async def spawn_again(self, progress: StepProgress) -> None:
        """Drive on the children of a journaled turn's spawns that were done but not settled.

        A journal is stored mid-turn, before the turn's children are waited
        for, so each spawn call it records as done has a child still at work
        (or never started): each is found by its call and driven again.
        """
        # A refused or malformed spawn is an error observation: it started nothing.
        done = {d.call_id for d in progress.done if d.name == SPAWN_TOOL and not d.is_error}
        for call in progress.assistant.tool_calls:
            if call.id in done:
                with self.gate.calling(call.id):
                    await self.spawn(SpawnArgs.model_validate(call.arguments))

    async def spawn(self, args: SpawnArgs) -> ToolOutcome:
        call_id = self.gate.call_id
        store = self.tree.store
        existing = store.child_run(self.run_id, call_id)
        if existing is None:
            refused = self.tree.ledger.refusal(self.depth + 1)
            if refused is not None:
                return self._refuse(call_id, *refused)
            spec = self._child(call_id, args)
            self.tree.ledger.agents += 1
            self.tree.driver.create_child(spec)
            existing = spec.run_id
        task = asyncio.create_task(self._drive(existing), name=f"ioh-agent-{existing}")
        self._spawned[call_id] = _Spawned(existing, task, args.goal)
        return ToolOutcome(f"sub-agent {existing} started")

    async def _drive(self, run_id: str) -> RunResult:
        async with self.tree.ledger.slot():
            return await self.tree.driver.drive_child(run_id, self)

    def _refuse(self, call_id: str, cap: SpawnCap, reason: str) -> ToolOutcome:
        detail = {"call_id": call_id, "cap": cap, "reason": reason}
        self._rows.append(TreeEventRow("refuse", json.dumps(detail), time.time()))
        return ToolOutcome(f"spawn_agent refused ({cap}): {reason}", is_error=True)

    def _child(self, call_id: str, args: SpawnArgs) -> ChildSpec:
        """The child's contract, policy and place; a bad argument is a ToolFailure."""
        run_id = f"{self.run_id}.{self.tree.ledger.agents}"  # unique: the count only grows
        narrowing = Policy.permissive().layer(f"spawn {call_id}")
        for method, globs in (
            ("deny_write", args.deny_write),
            ("deny_exec", args.deny_exec),
            ("deny_net", args.deny_net),
        ):
            if globs:
                narrowing = getattr(narrowing, method)(*globs)
        policy = self.gate.policy.contain(narrowing)
        root = self.contract.root
        settings: dict[str, Any] = {"goal": args.goal}
        if args.isolate:
            # A folder of the harness's own (0700, a name no one could take first), so the
            # copy is no more readable than the workspace; a spawn redone after a crash
            # makes another.
            copy = Path(tempfile.mkdtemp(prefix=f"{_COPY_PREFIX}{run_id}-")) / "workspace"
            base = isolate(root, copy)
            settings["isolated"] = {"copy": str(copy), "into": str(root), "base": base.to_json()}
            root = copy
        contract = self._child_contract(args, root)
        self._check_criterion(contract, policy)
        place = TreePlace(
            root_id=self.tree.root_id,
            parent_id=self.run_id,
            depth=self.depth + 1,
            spawn_call=call_id,
            tree_json=json.dumps(settings),
        )
        detail = {"call_id": call_id, "child": run_id, "goal": args.goal, "isolate": args.isolate}
        row = TreeEventRow("spawn", json.dumps(detail), time.time())
        return ChildSpec(run_id, contract, policy, place, row)

    def _child_contract(self, args: SpawnArgs, root: Path) -> TaskContract:
        parent = self.contract
        budget = Budget(
            max_steps=args.max_steps or parent.budget.max_steps,
            max_retries=parent.budget.max_retries,
        )
        fields = {
            "goal": args.goal,
            "mode": "workspace",
            "root": root,
            "verify": args.verify,
            "budget": budget,
            "tools": parent.tools,
            "skills": parent.skills,
        }
        try:
            with loading():
                contract = TaskContract.model_validate(fields)
            contract.verify.check_config(contract.mode)
        except ValidationError as exc:
            raise ToolFailure(f"the child's contract: {describe_validation(exc)}") from None
        except HarnessError as exc:
            raise ToolFailure(f"the child's criterion: {exc}") from None
        return contract

    def _check_criterion(self, contract: TaskContract, policy: Policy) -> None:
        from io_harness._preflight import missing_program

        for argv in contract.verify.commands():
            missing = missing_program(argv)
            if missing is not None:
                raise ToolFailure(f"the child's criterion runs {missing}; it could never pass")
            access = canonical_argv(argv)
            verdict = policy.explain(access.act, access.target)
            if verdict.effect is not Effect.ALLOW:
                raise ToolFailure(
                    f"the child's criterion runs {argv[0]!r}, but {verdict.describe()}; "
                    "a check must be allowed outright"
                )

    # -- reporting -----------------------------------------------------------------

    def _report(
        self, spawned: _Spawned, result: RunResult | BaseException
    ) -> tuple[str, bool, tuple[str, ...]]:
        """The observation for one child: what it did, the files it wrote, its feedback.

        A child another writer drives (its lease is not ours), or a store that failed,
        is not the child's failure: it stops this agent too, so the tree is resumed
        later, whole, rather than told a live child failed.
        """
        if isinstance(result, ResumeError | StorageError):
            raise result
        if not isinstance(result, RunResult):
            return f"sub-agent {spawned.run_id} failed: {_describe(result)}", True, ()
        store = self.tree.store
        trace = store.trace(result.run_id)
        written = sorted({path for call in trace.tool_calls for path in call.changed})
        money = format_money(result.cost_micros, self.tree.currency)
        spend = (
            money
            if not result.unpriced_calls
            else "unpriced"
            if not result.cost_micros
            else f"{money} + {result.unpriced_calls} unpriced calls"
        )
        lines = [
            f"sub-agent {result.run_id} ({spawned.goal!r}): {result.outcome.value} after "
            f"{result.steps} steps, {result.usage.total_tokens} tokens, {spend}"
        ]
        changed: tuple[str, ...] = ()
        isolated = _isolation(store, result.run_id)
        if isolated is None:
            changed = tuple(written)
            lines.append(
                f"files it wrote: {', '.join(written)}" if written else "it wrote no files"
            )
        elif result.succeeded:
            back = self._bring_back(*isolated)
            changed = back.brought if isinstance(back, BroughtBack) else ()
            lines.append(back.describe() if isinstance(back, BroughtBack) else back)
        else:
            lines.append("it worked in a private copy; nothing was brought back (it failed)")
        last = _last_words(trace.messages)
        if last:
            lines.append(f"its last words: {last}")
        check = result.verification
        if not result.succeeded and check is not None and not check.passed:
            lines.append(f"its check failed: {_cut(check.output or check.summary, _FEEDBACK)}")
        return "\n".join(lines), not result.succeeded, changed

    def _bring_back(self, copy: Path, into: Path, base: Snapshot) -> BroughtBack | str:
        if not copy.is_dir():
            return f"its private copy {copy} is gone, so its changes could not be brought back"
        try:
            back = bring_back(base, copy, into, self._may_write)
        except OSError as exc:
            return f"its changes could not be brought back: {exc.strerror or exc}"
        except PathRefused as exc:
            return f"its changes could not all be brought back: {exc}"
        if not back.conflicts and not back.withheld:  # else kept: the observation names it
            self.tree.copies.append(copy)
        return back

    def _may_write(self, rel: str) -> str | None:
        """Whether this agent's policy lets ``rel`` be written outright (a brought-back file
        is this agent's write, checked and recorded as one); if not, why not."""
        verdict = self.gate.check_outright(Access(Act.WRITE, rel))
        return None if verdict.effect is Effect.ALLOW else verdict.describe()


def _isolation(store: Store, run_id: str) -> tuple[Path, Path, Snapshot] | None:
    place = store.load_run(run_id).tree
    settings = json.loads(place.tree_json) if place and place.tree_json else {}
    isolated = settings.get("isolated")
    if not isolated:
        return None
    base = Snapshot.from_json(isolated["base"])
    return Path(isolated["copy"]), Path(isolated["into"]), base


_COPY_PREFIX = "ioh-isolated-"
"""The start of the name of an isolated child's private folder, which holds its copy."""


def _last_words(messages: Sequence[Any]) -> str:
    for message in reversed(messages):
        if message.role == "assistant" and message.text:
            return _cut(message.text.strip(), _LAST_WORDS)
    return ""


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} more characters]"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.CancelledError):
        return "it was cancelled"
    return f"{type(exc).__name__}: {exc}"
