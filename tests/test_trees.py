"""Sub-agent trees through the Harness: spawns, caps, the ledger, narrowing, isolation, pauses.

The model is a scripted responder that answers each agent by its goal (the
first user message) and its turn, so a tree's answers are a pure function of
the conversation, in any process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from decimal import Decimal
from functools import partial
from pathlib import Path

import pytest

import support
from io_harness import (
    CompletionRequest,
    CompletionResponse,
    ConfigError,
    Containment,
    Decision,
    FileContains,
    Harness,
    Policy,
    Price,
    PriceTable,
    ResumeError,
    RunOutcome,
    Store,
    TaskContract,
)
from io_harness._net import current_check
from io_harness.testing import ScriptedProvider, call, reply
from io_harness.tools import tool
from support import USAGE, child, goal_of, spawn, write

Turn = (
    Callable[[CompletionRequest], CompletionResponse | Awaitable[CompletionResponse]]
    | CompletionResponse
)


class Agents:
    """Answers each agent from its own script, by goal and turn; counts calls in flight."""

    def __init__(self, scripts: Mapping[str, Sequence[Turn]], pause: float = 0.0) -> None:
        self.scripts = scripts
        self.pause = pause
        self.in_flight = 0
        self.peak: dict[str, int] = {}
        self.calls: list[str] = []

    async def __call__(self, request: CompletionRequest) -> CompletionResponse:
        goal = goal_of(request)
        turn = sum(m.role == "assistant" for m in request.messages)
        self.calls.append(goal)
        self.in_flight += 1
        self.peak["all"] = max(self.peak.get("all", 0), self.in_flight)
        try:
            if self.pause:
                await asyncio.sleep(self.pause)
            answer = self.scripts[goal][turn]
            if not callable(answer):
                return answer
            given = answer(request)
            return given if isinstance(given, CompletionResponse) else await given
        finally:
            self.in_flight -= 1

    def provider(self) -> ScriptedProvider:
        return ScriptedProvider(self)


root_contract = partial(support.contract, goal="coordinate", file="root.txt")
"""The root's task: done when root.txt holds ``done``."""


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


def observation(provider: ScriptedProvider, goal: str, turn: int) -> list[str]:
    """The tool results the agent ``goal`` read at its ``turn`` (0-based)."""
    seen = [r for r in provider.requests if goal_of(r) == goal]
    results = seen[turn].messages[-1].content
    return [str(block.content) for block in results]  # type: ignore[union-attr]


async def test_children_run_their_tasks_and_report_back_in_spawn_order(work: Path) -> None:
    agents = Agents(
        {
            "coordinate": [
                reply("splitting", [spawn("write a", "a.txt"), spawn("write b", "b.txt")], USAGE),
                reply("finishing", [write("root.txt")], USAGE),
            ],
            "write a": child("a.txt"),
            "write b": child("b.txt"),
        }
    )
    provider = agents.provider()
    store = Store.memory()
    harness = Harness(provider, store=store, containment=Containment(max_depth=1))

    result = await harness.run(root_contract(work), run_id="root")

    assert result.outcome is RunOutcome.SUCCESS
    assert (work / "a.txt").read_text() == (work / "b.txt").read_text() == "done\n"
    first, second = observation(provider, "coordinate", 1)
    assert first.startswith("sub-agent root.1 ('write a'): success after 1 step, 110 tokens")
    assert "files it wrote: a.txt" in first and "its last words: writing a.txt" in first
    assert second.startswith("sub-agent root.2 ('write b'): success")
    nodes = store.tree("root")
    assert [(n.run.id, n.parent_id, n.depth, n.spawn_call) for n in nodes] == [
        ("root", None, 0, None),
        ("root.1", "root", 1, "call_1_2"),
        ("root.2", "root", 1, "call_1_3"),
    ]
    assert all(n.run.outcome == "success" for n in nodes)
    # One ledger: every agent's draws add up to the tree's tokens.
    assert store.tree_drawn("root")[0] == sum(n.run.tokens for n in nodes) == 440
    kinds = [e.kind for e in store.trace("root").tree_events]
    assert kinds == ["draw", "spawn", "spawn", "draw"]


class Connecting(ScriptedProvider):
    """A scripted model that connects, as a vendor's would: each call asks the run's check
    about its endpoint, which records the act in the asking agent's trace."""

    def endpoints(self) -> tuple[str, ...]:
        return ("model.example:443",)

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        check = current_check()
        assert check is not None
        assert check("model.example:443", True) is None
        return await super().complete(request)


async def test_every_agent_records_its_own_model_connections(work: Path) -> None:
    agents = Agents(
        {
            "coordinate": [
                reply("splitting", [spawn("write a", "a.txt"), spawn("write b", "b.txt")], USAGE),
                reply("finishing", [write("root.txt")], USAGE),
            ],
            "write a": child("a.txt"),
            "write b": child("b.txt"),
        }
    )
    store = Store.memory()
    harness = Harness(Connecting(agents), store=store, containment=Containment(max_depth=1))

    result = await harness.run(root_contract(work), run_id="root")

    assert result.outcome is RunOutcome.SUCCESS

    def connections(agent: str) -> list[int]:
        return [
            p.step
            for p in store.trace(agent).permissions
            if (p.act, p.target, p.decision) == ("net", "model.example:443", "allowed")
        ]

    # The root's endpoint is checked once before its first step, then at each of its two
    # calls; each child (done in one step: its write passes its check) calls once.
    assert connections("root") == [1, 1, 2]
    assert connections("root.1") == connections("root.2") == [1]


async def test_a_child_another_writer_drives_stops_the_tree_rather_than_failing(
    work: Path, tmp_path: Path
) -> None:
    """A child whose lease another writer holds (a driver the tree was taken from, still
    alive) is not a failed child: the tree stops, to be resumed whole later."""
    agents = Agents(
        {
            "coordinate": [
                reply("splitting", [spawn("write a", "a.txt")], USAGE),
                reply("finishing", [write("root.txt")], USAGE),
            ],
            "write a": child("a.txt"),
        }
    )
    path = tmp_path / "runs.db"
    with Store.open(path) as store, Store.open(path) as elsewhere:
        harness = Harness(agents.provider(), store=store, containment=Containment(max_depth=1))
        with elsewhere.lease("root.1"), pytest.raises(ResumeError, match=r"root\.1"):
            await harness.run(root_contract(work), run_id="root")
        told = [call.result for call in store.trace("root").tool_calls]
        assert not any("failed" in text for text in told), told

        result = await harness.resume("root")  # the other writer has let go

    assert result.outcome is RunOutcome.SUCCESS
    assert (work / "a.txt").read_text() == "done\n"


async def test_spawn_agent_is_offered_only_with_containment(work: Path) -> None:
    provider = ScriptedProvider([reply("done", [write("root.txt")])])

    await Harness(provider).run(root_contract(work))

    assert "spawn_agent" not in [spec.name for spec in provider.requests[0].tools]


async def test_concurrent_children_are_bounded_tree_wide(work: Path) -> None:
    goals = [f"write {n}" for n in range(6)]
    agents = Agents(
        {
            "coordinate": [
                reply("fan out", [spawn(g, f"{g[-1]}.txt") for g in goals], USAGE),
                reply("finishing", [write("root.txt")], USAGE),
            ],
            **{g: child(f"{g[-1]}.txt") for g in goals},
        },
        pause=0.02,
    )
    harness = Harness(
        agents.provider(),
        containment=Containment(max_depth=1, max_total_agents=10, max_concurrent_agents=2),
    )

    result = await harness.run(root_contract(work))

    assert result.outcome is RunOutcome.SUCCESS
    assert agents.peak["all"] == 2  # two children's calls at once, never three
    assert all((work / f"{n}.txt").exists() for n in range(6))


@pytest.mark.parametrize(
    ("containment", "cap"),
    [
        (Containment(max_depth=1), "depth"),
        (Containment(max_depth=3, max_total_agents=2), "agents"),
        (Containment(max_depth=3, max_total_tokens=200), "tokens"),
        (Containment(max_depth=3, max_total_cost=Decimal("0.00015")), "cost"),
        (Containment(max_depth=3, max_total_wall_seconds=0.05), "wall"),
    ],
)
async def test_a_spawn_past_a_cap_is_refused_as_an_observation_naming_it(
    work: Path, containment: Containment, cap: str
) -> None:
    async def slow_middle(request: CompletionRequest) -> CompletionResponse:
        await asyncio.sleep(0.1)  # past the wall cap: its spawn comes too late
        return reply("delegate again", [spawn("leaf", "leaf.txt")], USAGE)

    agents = Agents(
        {
            "coordinate": [
                reply("delegate", [spawn("middle", "m.txt")], USAGE),
                reply("finishing", [write("root.txt")], USAGE),
            ],
            "middle": [
                slow_middle
                if cap == "wall"
                else reply("delegate again", [spawn("leaf", "leaf.txt")], USAGE),
                reply("doing it myself", [write("m.txt")], USAGE),
                reply("done", usage=USAGE),
            ],
            "leaf": child("leaf.txt"),
        }
    )
    provider = agents.provider()
    store = Store.memory()
    # 1 per million input tokens, 0 for output: each call costs 0.0001.
    prices = PriceTable({"scripted": Price(input=Decimal(1), output=Decimal(0))})
    harness = Harness(provider, store=store, containment=containment, prices=prices)

    result = await harness.run(root_contract(work), run_id="r")

    said = next(c.result for c in store.trace("r.1").tool_calls if c.name == "spawn_agent")
    assert said.startswith(f"spawn_agent refused ({cap}):"), said
    ended = {
        "tokens": RunOutcome.TOKEN_BUDGET_EXCEEDED,
        "cost": RunOutcome.COST_BUDGET_EXCEEDED,
        "wall": RunOutcome.TIME_BUDGET_EXCEEDED,
    }
    if cap in ended:  # the tree's budget ran out: every agent ends on it
        assert result.outcome is ended[cap]
        report = store.trace("r").tool_calls[0].result
        assert report.startswith(f"sub-agent r.1 ('middle'): {ended[cap].value}"), report
    else:
        assert result.outcome is RunOutcome.SUCCESS
    refused = [e for e in store.trace("r.1").tree_events if e.kind == "refuse"]
    assert [e.detail["cap"] for e in refused] == [cap]
    assert not (work / "leaf.txt").exists()


async def test_a_child_cannot_widen_its_parents_policy(work: Path) -> None:
    (work / "secret").mkdir()
    agents = Agents(
        {
            "coordinate": [
                reply("delegate", [spawn("sneak", "out.txt", deny_write=["notes.txt"])], USAGE),
                reply("finishing", [write("root.txt")], USAGE),
            ],
            "sneak": [
                reply("try", [write("secret/x.txt"), write("notes.txt"), write("out.txt")], USAGE),
                reply("done", usage=USAGE),
            ],
        }
    )
    provider = agents.provider()
    policy = Policy.default().layer("parent").deny_write("secret/**")
    store = Store.memory()
    harness = Harness(provider, store=store, policy=policy, containment=Containment())

    result = await harness.run(root_contract(work), run_id="p")

    assert result.outcome is RunOutcome.SUCCESS
    denied, narrowed, allowed = [c.result for c in store.trace("p.1").tool_calls]
    assert "refused by the policy" in denied and not (work / "secret" / "x.txt").exists()
    assert "refused by the policy" in narrowed and not (work / "notes.txt").exists()
    assert (work / "out.txt").exists(), allowed


async def test_an_isolated_child_brings_its_files_back_or_names_the_conflicts(
    work: Path,
) -> None:
    (work / "shared.txt").write_text("base\n")
    agents = Agents(
        {
            "coordinate": [
                reply(
                    "two isolated children",
                    [
                        spawn("clean", "clean.txt", isolate=True),
                        spawn("clash", "clash-done.txt", isolate=True),
                    ],
                    USAGE,
                ),
                reply("finishing", [write("root.txt")], USAGE),
            ],
            "clean": child("clean.txt"),
            "clash": [
                # Its parent changes shared.txt meanwhile (below), so this is a conflict.
                reply("editing", [write("shared.txt", "clash\n")], USAGE),
                lambda request: _parent_edits(request, work),
                reply("done", usage=USAGE),
            ],
        }
    )
    provider = agents.provider()
    harness = Harness(provider, containment=Containment(max_depth=1))

    result = await harness.run(root_contract(work))

    assert result.outcome is RunOutcome.SUCCESS
    clean, clash = observation(provider, "coordinate", 1)
    assert (work / "clean.txt").read_text() == "done\n"
    assert "brought back" in clean.lower() or "clean.txt" in clean
    assert (work / "shared.txt").read_text() == "parent\n"
    assert "conflict" in clash.lower() and "shared.txt" in clash, clash
    assert (work / "clash-done.txt").exists()  # its other file came back


def _parent_edits(request: CompletionRequest, work: Path) -> CompletionResponse:
    (work / "shared.txt").write_text("parent\n")
    return reply("finishing", [write("clash-done.txt")], USAGE)


async def test_a_childs_ask_pauses_the_tree_and_an_approval_resumes_it(
    tmp_path: Path, work: Path
) -> None:
    agents = Agents(
        {
            "coordinate": [
                reply("delegate", [spawn("careful", "c.txt")], USAGE),
                reply("finishing", [write("root.txt")], USAGE),
            ],
            "careful": child("c.txt"),
        }
    )
    policy = Policy.default().layer("review").ask_write("c.txt")
    store = Store.open(tmp_path / "runs.db")
    harness = Harness(
        agents.provider(), store=store, policy=policy, containment=Containment(max_depth=1)
    )

    paused = await harness.run(root_contract(work), run_id="t")

    assert paused.outcome is RunOutcome.AWAITING_APPROVAL
    assert paused.request is not None and paused.request.target.endswith("c.txt")
    assert [row.run_id for row in store.approvals()] == ["t.1"]
    assert not (work / "c.txt").exists()
    spent = store.tree_drawn("t")

    resumed = await harness.resume("t", decision=Decision.approve(by="test"))

    assert resumed.outcome is RunOutcome.SUCCESS
    assert (work / "c.txt").read_text() == "done\n"
    # The child finishes its deferred step and the root its journaled one: only the
    # root's last turn is a new call.
    assert store.tree_drawn("t")[0] == spent[0] + 110
    assert [n.run.outcome for n in store.tree("t")] == ["success", "success"]


async def test_containment_is_checked(work: Path) -> None:
    with pytest.raises(ConfigError, match="containment must be a Containment"):
        Harness(ScriptedProvider([]), containment={"max_depth": 1})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_concurrent_agents"):
        Containment(max_concurrent_agents=0)
    file_contract = TaskContract.file("g", work / "f.txt", FileContains("x"))
    with pytest.raises(ConfigError, match="file mode"):
        await Harness(ScriptedProvider([]), containment=Containment()).run(file_contract)


async def test_a_bad_criterion_is_an_observation_the_parent_can_fix(work: Path) -> None:
    agents = Agents(
        {
            "coordinate": [
                reply("delegate", [call("spawn_agent", goal="x", verify={"kind": "nope"})]),
                reply("finishing", [write("root.txt")]),
            ],
        }
    )
    provider = agents.provider()

    result = await Harness(provider, containment=Containment()).run(root_contract(work))

    assert result.outcome is RunOutcome.SUCCESS
    said = observation(provider, "coordinate", 1)[0]
    assert said.startswith("spawn_agent: the child's contract:"), said


async def test_a_child_calls_its_parents_tools_under_its_own_narrowed_policy(
    work: Path,
) -> None:
    stamped: list[str] = []

    @tool
    def stamp(label: str) -> str:
        """Stamp a label."""
        stamped.append(label)
        return f"stamped {label}"

    agents = Agents(
        {
            "coordinate": [
                reply(
                    "delegate",
                    [spawn("stamper", "s.txt"), spawn("no stamps", "n.txt", deny_exec=["stamp"])],
                ),
                reply("finishing", [write("root.txt")]),
            ],
            "stamper": [reply("stamping", [call("stamp", label="a"), write("s.txt")])],
            "no stamps": [reply("trying", [call("stamp", label="b"), write("n.txt")])],
        }
    )
    store = Store.memory()
    harness = Harness(agents.provider(), store=store, tools=[stamp], containment=Containment())

    result = await harness.run(root_contract(work), run_id="c")

    assert result.outcome is RunOutcome.SUCCESS
    assert stamped == ["a"]
    refused = store.trace("c.2").tool_calls[0]
    assert refused.kind == "caller" and "refused by the policy" in refused.result


async def test_an_ask_in_the_turn_of_a_spawn_defers_after_the_child_and_resumes_once(
    tmp_path: Path, work: Path
) -> None:
    agents = Agents(
        {
            "coordinate": [
                reply("both", [spawn("helper", "h.txt"), write("asked.txt")], USAGE),
                reply("finishing", [write("root.txt")], USAGE),
            ],
            "helper": child("h.txt"),
        }
    )
    provider = agents.provider()
    policy = Policy.default().layer("review").ask_write("asked.txt")
    store = Store.open(tmp_path / "runs.db")
    harness = Harness(provider, store=store, policy=policy, containment=Containment())

    paused = await harness.run(root_contract(work), run_id="d")

    assert paused.outcome is RunOutcome.AWAITING_APPROVAL
    assert (work / "h.txt").exists() and not (work / "asked.txt").exists()
    resumed = await harness.resume("d", decision=Decision.approve(by="test"))

    assert resumed.outcome is RunOutcome.SUCCESS
    assert (work / "asked.txt").exists() and (work / "root.txt").exists()
    spawned, wrote = observation(provider, "coordinate", 1)
    assert wrote.startswith("Created asked.txt") or "asked.txt" in wrote, wrote
    assert spawned.startswith("sub-agent d.1 ('helper'): success"), spawned
    assert agents.calls.count("coordinate") == 2 and agents.calls.count("helper") == 1
    assert [s.step for s in store.trace("d").steps] == [1, 2]
