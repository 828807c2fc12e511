"""What a sub-agent costs the harness itself, and what a 100-child fan-out takes.

Two workloads, both on :meth:`Store.memory` with a scripted provider that
answers each agent by its goal and turn (as ``tests/test_trees.py`` does), so
the model costs next to nothing and what is timed is the harness.

1. **The cost of a spawn.** A root in a fresh workspace answers its first turn
   with N calls, then its second with a ``write_file`` of ``root.txt``, which
   passes its criterion. In the *spawn* run the N calls are ``spawn_agent``
   calls (``Containment(max_depth=1, max_concurrent_agents=8)``), and each
   child answers its one turn with a ``write_file`` of its own file, which
   passes its criterion: a child succeeds in one step. In the *baseline* run
   the same root, under the same harness, makes the N ``write_file`` calls
   itself in its first turn. Both runs write the same N + 1 files; what the
   spawn run does more is the harness's work of a child: its contract and
   policy, its run created in the store, its engine and tools, a provider
   call's request built and answered, a step committed, its criterion checked,
   its run finished, and the report its parent reads. The time spent inside
   ``provider.complete`` is measured and subtracted from both runs, so

       per child = ((spawn wall - its provider time)
                    - (baseline wall - its provider time)) / N

   The two runs alternate, after one warm-up pair, for ``--repeat`` pairs;
   the figure is the median over pairs. The same difference in the process's
   CPU time is printed beside it: on a machine shared with other work it
   moves less than the wall time. The issue's target is at most 5 ms a
   child; the script prints whether the median meets it and asserts nothing.

2. **A fan-out.** The spawn run with ``--fanout`` children (100 by default)
   and ``max_concurrent_agents=8``: its wall time (the median of
   ``--repeat`` runs), then one more run under :mod:`tracemalloc` for its peak
   traced memory (tracemalloc slows Python down several times, so it is not
   timed), and the process's maximum resident set size
   (``resource.getrusage``), before the fan-out runs and after them.

``--split`` then times, from outside, the functions of the harness a child
goes through (wrappers installed by this script only, on the classes
``RunKit``, ``RunTools``, ``ChildDriver`` and ``SqliteStore``, on the
trees' ``child_spec`` and ``child_report``, and on ``remove_partial_writes``
in ``io_harness.prepare._setup``), over ``--repeat``
spawn runs and as many baseline runs, and prints each one's wall time per
child. ``--profile`` runs one spawn run under :mod:`cProfile` and prints its
top entries by own time and by cumulative time.

Usage, from the repository root::

    .venv/bin/python bench/tree_spawn.py                  # N=20, 7 pairs, 100-child fan-out
    .venv/bin/python bench/tree_spawn.py --children 50 --repeat 11
    .venv/bin/python bench/tree_spawn.py --split --profile --top 30
    .venv/bin/python bench/tree_spawn.py --quick          # small numbers, for the tests
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import gc
import os
import platform
import pstats
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from io_harness import (
    Budget,
    CompletionRequest,
    CompletionResponse,
    Containment,
    Harness,
    RunOutcome,
    Store,
    TaskContract,
    ToolCall,
    Usage,
    WorkspaceFileContains,
)
from io_harness.prepare import _setup
from io_harness.prepare._kit import RunKit
from io_harness.store._sqlite import SqliteStore
from io_harness.testing import ScriptedProvider, reply
from io_harness.tools._run_tools import RunTools
from io_harness.trees import ChildDriver
from io_harness.trees import _node as tree_node

Mode = Literal["spawn", "baseline"]
TARGET_MS = 5.0
"""The issue's target: the harness's own cost of a spawn, per child."""
CONCURRENT = 8
USAGE = Usage(input_tokens=100, output_tokens=10)
ROOT_FILE = "root.txt"
NEEDLE = "done"

now = time.perf_counter_ns


# -- the scripted model --------------------------------------------------------------------


def goal_of(request: CompletionRequest) -> str:
    """An agent's goal: the first paragraph of its task message."""
    return str(request.messages[0].text).split("\n\n", 1)[0]


def child_file(index: int) -> str:
    """The file child ``index`` writes."""
    return f"c{index}.txt"


def child_goal(index: int) -> str:
    """Child ``index``'s goal, by which the scripted model knows it."""
    return f"write {child_file(index)}"


def write(call_id: str, path: str) -> ToolCall:
    """A ``write_file`` call of ``path`` with the needle in it."""
    return ToolCall(id=call_id, name="write_file", arguments={"path": path, "content": "done\n"})


def spawn(call_id: str, index: int) -> ToolCall:
    """A ``spawn_agent`` call of child ``index``, checked by its file holding the needle."""
    verify = {"kind": "workspace_file_contains", "file": child_file(index), "needle": NEEDLE}
    arguments = {"goal": child_goal(index), "verify": verify}
    return ToolCall(id=call_id, name="spawn_agent", arguments=arguments)


def write_child(call_id: str, index: int) -> ToolCall:
    """The baseline's stand-in for a spawn: the root writes child ``index``'s file itself."""
    return write(call_id, child_file(index))


class Agents:
    """Answers every agent of one run by its goal and turn, from answers built in advance.

    The root's first turn is N spawns (or N writes, for the baseline), its
    second a write of ``root.txt``; a child's only turn is a write of its file.
    Tool calls carry their ids, so the provider copies nothing.
    """

    def __init__(self, mode: Mode, children: int) -> None:
        self.root_goal = f"coordinate {children} children" if mode == "spawn" else "write files"
        make = spawn if mode == "spawn" else write_child
        first = reply("fanning out", [make(f"root_{i}", i) for i in range(children)], USAGE)
        last = reply("finishing", [write("root_last", ROOT_FILE)], USAGE)
        self.answers: dict[str, list[CompletionResponse]] = {self.root_goal: [first, last]}
        if mode == "spawn":
            for i in range(children):
                mine = reply(f"writing {child_file(i)}", [write("child_0", child_file(i))], USAGE)
                self.answers[child_goal(i)] = [mine]

    def __call__(self, request: CompletionRequest) -> CompletionResponse:
        turn = sum(m.role == "assistant" for m in request.messages)
        return self.answers[goal_of(request)][turn]


@dataclass
class TimedProvider:
    """A :class:`ScriptedProvider` whose ``complete`` is timed; its log of requests is dropped.

    The responder never awaits, so no other agent's code runs inside a call:
    ``spent`` is the provider's own time, summed over every call of every agent.
    """

    provider: ScriptedProvider
    spent: int = 0
    calls: int = 0

    @classmethod
    def of(cls, agents: Agents) -> TimedProvider:
        timed = cls(ScriptedProvider(agents))
        complete = timed.provider.complete

        async def timed_complete(request: CompletionRequest) -> CompletionResponse:
            started = now()
            try:
                return await complete(request)
            finally:
                timed.provider.requests.clear()  # the test helper's log is not the harness's
                timed.spent += now() - started
                timed.calls += 1

        timed.provider.complete = timed_complete  # type: ignore[method-assign]
        return timed


# -- one run -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """One run: its wall and CPU time and the provider's share (ns), and its provider calls.

    The CPU time is the process's (:func:`time.process_time_ns`): it leaves out
    the time the run waited while other processes had the cores, so it moves
    less than the wall time on a shared machine.
    """

    wall: int
    cpu: int
    provider: int
    calls: int

    @property
    def harness(self) -> int:
        """The run's wall time less the provider's (ns)."""
        return self.wall - self.provider

    @property
    def harness_cpu(self) -> int:
        """The run's CPU time less the provider's (ns)."""
        return self.cpu - self.provider


@dataclass
class Split:
    """Wall time (ns) and calls of chosen functions of the harness, summed while ``active``.

    The functions are all synchronous, so a sum is the time spent inside them;
    a function called inside another is counted in both.
    """

    active: bool = False
    spent: dict[str, int] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def install(self) -> None:
        """Wrap every function of :data:`SPLIT` (for the rest of this process)."""
        for owner, name, label in SPLIT:
            setattr(owner, name, self._wrap(getattr(owner, name), label))

    def _wrap(self, function: Callable[..., Any], label: str) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not self.active:
                return function(*args, **kwargs)
            started = now()
            try:
                return function(*args, **kwargs)
            finally:
                self.spent[label] = self.spent.get(label, 0) + now() - started
                self.calls[label] = self.calls.get(label, 0) + 1

        return timed

    def take(self) -> tuple[dict[str, int], dict[str, int]]:
        """The sums so far, which start again from nothing."""
        taken = (self.spent, self.calls)
        self.spent, self.calls = {}, {}
        return taken


SPLIT: tuple[tuple[object, str, str], ...] = (
    (RunKit, "tools", "an agent's tools (RunKit.tools)"),
    (RunTools, "__init__", "  their specs (RunTools.__init__)"),
    (_setup, "remove_partial_writes", "  clearing partial writes (a walk)"),
    (ChildDriver, "create_child", "a child's run (ChildDriver.create_child)"),
    (RunKit, "new_run", "  its row (RunKit.new_run)"),
    (SqliteStore, "create_run", "  store.create_run"),
    (tree_node, "child_spec", "its contract, policy, id (trees child_spec)"),
    (SqliteStore, "tree", "  store.tree"),
    (tree_node, "child_report", "its report to the parent (trees child_report)"),
    (SqliteStore, "trace", "  store.trace"),
    (SqliteStore, "commit_step", "store.commit_step"),
    (SqliteStore, "load_run", "store.load_run"),
)
"""What ``--split`` times: the owner, the function's name, its label (indented: called
mostly from the row above; ``create_child`` holds one of a child's two tools builds)."""


def one_run(
    mode: Mode,
    children: int,
    base: Path,
    profiler: cProfile.Profile | None = None,
    split: Split | None = None,
) -> Timing:
    """One root run in a fresh workspace and memory store; checked, then timed.

    The wall time runs from the call of ``Harness.run`` to its result: the
    harness's checks, the root's run, every child, and the root's last step.
    """
    work = Path(tempfile.mkdtemp(prefix="ioh-tree-", dir=base))
    store = Store.memory()
    agents = Agents(mode, children)
    timed = TimedProvider.of(agents)
    containment = Containment(
        max_depth=1, max_total_agents=children + 1, max_concurrent_agents=CONCURRENT
    )
    harness = Harness(timed.provider, store=store, containment=containment)
    contract = TaskContract.workspace(
        agents.root_goal,
        work,
        WorkspaceFileContains(ROOT_FILE, NEEDLE),
        budget=Budget(max_steps=5),
    )

    async def go() -> tuple[int, int, RunOutcome]:
        cpu_started = time.process_time_ns()
        started = now()
        result = await harness.run(contract, run_id="root")
        return now() - started, time.process_time_ns() - cpu_started, result.outcome

    try:
        gc.collect()
        if profiler is not None:
            profiler.enable()
        if split is not None:
            split.active = True
        try:
            wall, cpu, outcome = asyncio.run(go())
        finally:
            if profiler is not None:
                profiler.disable()
            if split is not None:
                split.active = False
        _check(mode, children, store, work, outcome)
    finally:
        store.close()
        shutil.rmtree(work, ignore_errors=True)
    return Timing(wall, cpu, timed.spent, timed.calls)


def _check(mode: Mode, children: int, store: Store, work: Path, outcome: RunOutcome) -> None:
    """Stop the script if the run did not do what it is meant to measure."""
    if outcome is not RunOutcome.SUCCESS:
        raise SystemExit(f"the {mode} run went wrong: {outcome}")
    nodes = store.tree("root")
    agents = children + 1 if mode == "spawn" else 1
    if len(nodes) != agents or any(n.run.outcome != "success" for n in nodes):
        raise SystemExit(f"the {mode} run left {len(nodes)} agents, not {agents} successes")
    if any(n.run.steps != 1 for n in nodes[1:]):
        raise SystemExit(f"a child of the {mode} run took more than one step")
    missing = [f for f in map(child_file, range(children)) if not (work / f).exists()]
    if missing:
        raise SystemExit(f"the {mode} run did not write {', '.join(missing[:3])}")


# -- figures -------------------------------------------------------------------------------


def ms(ns: float) -> str:
    """Nanoseconds as aligned milliseconds."""
    return f"{ns / 1e6:8.2f} ms"


@dataclass(frozen=True)
class Pair:
    """One spawn run and the baseline run beside it."""

    spawn: Timing
    baseline: Timing

    def per_child(self, children: int) -> float:
        """The harness's cost of one child (ns): the pair's difference, shared out."""
        return (self.spawn.harness - self.baseline.harness) / children

    def per_child_cpu(self, children: int) -> float:
        """The same in the process's CPU time (ns)."""
        return (self.spawn.harness_cpu - self.baseline.harness_cpu) / children


def measure_spawn_cost(children: int, repeat: int, base: Path) -> list[Pair]:
    """One warm-up pair, then ``repeat`` pairs; the order alternates so drift hits both."""
    one_run("spawn", children, base)
    one_run("baseline", children, base)
    pairs = []
    for n in range(repeat):
        if n % 2:
            baseline = one_run("baseline", children, base)
            spawned = one_run("spawn", children, base)
        else:
            spawned = one_run("spawn", children, base)
            baseline = one_run("baseline", children, base)
        pairs.append(Pair(spawned, baseline))
    return pairs


def report_spawn_cost(pairs: Sequence[Pair], children: int) -> float:
    """Print part 1's figures; the median cost per child (ns)."""
    per_child = [p.per_child(children) for p in pairs]
    median = statistics.median(per_child)
    spawn_wall = statistics.median(p.spawn.wall for p in pairs)
    spawn_provider = statistics.median(p.spawn.provider for p in pairs)
    base_wall = statistics.median(p.baseline.wall for p in pairs)
    base_provider = statistics.median(p.baseline.provider for p in pairs)
    rounds = " ".join(f"{c / 1e6:.2f}" for c in per_child)
    print()
    print(f"[spawn cost] N={children} children, {len(pairs)} pairs after 1 warm-up pair")
    print(
        f"  spawn run     wall {ms(spawn_wall)}   provider {ms(spawn_provider)}   "
        f"({pairs[0].spawn.calls} provider calls)"
    )
    print(
        f"  baseline run  wall {ms(base_wall)}   provider {ms(base_provider)}   "
        f"({pairs[0].baseline.calls} provider calls)"
    )
    print(f"  harness cost per child  median {ms(median)}   (pairs: {rounds} ms)")
    print(f"  harness cost per child  min    {ms(min(per_child))}   max {ms(max(per_child))}")
    cpu = statistics.median(p.per_child_cpu(children) for p in pairs)
    print(f"  harness cost per child  median {ms(cpu)}   in CPU time")
    verdict = "meets" if median <= TARGET_MS * 1e6 else "MISSES"
    print(f"  target: at most {TARGET_MS:g} ms per child -> {verdict} it ({median / 1e6:.2f} ms)")
    return median


def max_rss_mib() -> float:
    """The process's maximum resident set so far (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def traced_peak(children: int, base: Path) -> tuple[int, int]:
    """Peak traced memory (bytes) during one spawn run, and what it still held after."""
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        one_run("spawn", children, base)
        _, peak = tracemalloc.get_traced_memory()
        gc.collect()
        current, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - before, current - before


def fan_out(children: int, repeat: int, base: Path) -> None:
    """Part 2: the wall time of a fan-out (median of ``repeat``), its memory."""
    rss_before = max_rss_mib()
    walls = [one_run("spawn", children, base) for _ in range(repeat)]
    median = statistics.median(t.wall for t in walls)
    provider = statistics.median(t.provider for t in walls)
    peak, kept = traced_peak(children, base)
    rss_after = max_rss_mib()
    rounds = " ".join(f"{t.wall / 1e6:.0f}" for t in walls)
    print()
    print(
        f"[fan-out] {children} children in one turn, max_concurrent_agents={CONCURRENT}, "
        f"{repeat} runs"
    )
    print(f"  wall time               median {ms(median)}   (runs: {rounds} ms)")
    print(f"  of which provider calls median {ms(provider)}")
    print(f"  wall time per child            {ms(median / children)}")
    print(
        f"  tracemalloc peak        {peak / 2**20:8.2f} MiB during one run, "
        f"{kept / 2**10:.1f} KiB still held after it"
    )
    print(
        f"  max RSS of the process  {rss_after:8.1f} MiB after the fan-out runs "
        f"({rss_before:.1f} MiB before them)"
    )


def split_spawn(children: int, repeat: int, base: Path) -> None:
    """Time the functions of :data:`SPLIT` over ``repeat`` spawn and baseline runs."""
    split = Split()
    split.install()
    one_run("spawn", children, base, split=split)
    one_run("baseline", children, base, split=split)
    split.take()
    spawned = [one_run("spawn", children, base, split=split) for _ in range(repeat)]
    spent, calls = split.take()
    baseline = [one_run("baseline", children, base, split=split) for _ in range(repeat)]
    base_spent, _ = split.take()
    cost = statistics.median(t.harness for t in spawned)
    cost -= statistics.median(t.harness for t in baseline)
    share = repeat * children
    print()
    print(
        f"[split] wall time in each function per child, N={children}, {repeat} spawn and "
        f"{repeat} baseline runs (an indented row is called mostly from the one above)"
    )
    print(f"  harness cost per child in these runs (wrapped): {ms(cost / children)}")
    print(f"  {'function':50} {'calls/child':>11} {'spawn run':>11} {'baseline':>11}")
    for _owner, _name, label in SPLIT:
        print(
            f"  {label:50} {calls.get(label, 0) / share:11.2f} "
            f"{ms(spent.get(label, 0) / share):>11} {ms(base_spent.get(label, 0) / share):>11}"
        )


def profile_spawn(children: int, base: Path, top: int) -> None:
    """One spawn run under cProfile: its top entries by own and by cumulative time."""
    profiler = cProfile.Profile()
    one_run("spawn", children, base, profiler)
    for order in ("tottime", "cumulative"):
        print()
        print(f"[profile] one spawn run, N={children} (top {top} by {order})")
        stats = pstats.Stats(profiler, stream=sys.stdout)
        stats.sort_stats(order).print_stats(top)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what :mod:`platform` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_line() -> str:
    """The interpreter, SQLite, the CPU and the load the figures were taken with."""
    return (
        f"python {platform.python_version()} ({sys.implementation.name}), "
        f"sqlite {sqlite3.sqlite_version}, {platform.system()} {platform.machine()}, "
        f"{cpu_model()}, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f} at start"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print; 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--children", type=int, default=20, help="N, children per spawn run (default 20)"
    )
    parser.add_argument("--repeat", type=int, default=7, help="measured pairs and runs (default 7)")
    parser.add_argument(
        "--fanout", type=int, default=100, help="children of the fan-out (default 100)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="small numbers: N=4, 2 pairs, a 10-child fan-out"
    )
    parser.add_argument(
        "--split", action="store_true", help="also time the harness's functions a child calls"
    )
    parser.add_argument("--profile", action="store_true", help="also cProfile one spawn run")
    parser.add_argument("--top", type=int, default=25, help="profile lines to print")
    args = parser.parse_args(argv)
    if args.quick:
        args.children, args.repeat, args.fanout = 4, 2, 10
    if args.children < 1 or args.repeat < 1 or args.fanout < 1:
        parser.error("--children, --repeat and --fanout must be at least 1")

    print(machine_line())
    print(
        "memory store; each child answers once with a write_file of its file and succeeds in "
        "one step; provider time subtracted"
    )
    print(
        "per child = (spawn run - baseline run, the root writing the N files itself) / N, "
        "median over pairs"
    )
    base = Path(tempfile.mkdtemp(prefix="ioh-bench-tree-"))
    try:
        pairs = measure_spawn_cost(args.children, args.repeat, base)
        report_spawn_cost(pairs, args.children)
        fan_out(args.fanout, args.repeat, base)
        if args.split:
            split_spawn(args.children, args.repeat, base)
        if args.profile:
            profile_spawn(args.children, base, args.top)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
