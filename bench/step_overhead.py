"""What one step of the loop costs the harness itself, with a provider that costs nothing.

A scripted workspace run of S steps: steps 1 to S-1 each make one ``read_file``
call of a small file (it changes no file, so the criterion is not checked) —
or, in the ``caller`` workload, one call of a caller's no-op tool (an async
:class:`io_harness.Tool` that returns ``"ok"``, checked by the policy as an
``exec`` of its name like every caller tool) —, and
step S ends the turn with a text reply, so the criterion is checked once and
the run ends SUCCESS. The provider is :class:`io_harness.testing.ScriptedProvider`
with one callable script; the time spent inside ``provider.complete`` is
subtracted from every step, so what is left is the harness's own cost.

Nothing in the library is changed: the timings come from wrappers installed by
this script only (``commit_step`` on the store instance, ``complete`` on the
provider instance, the class attributes ``RunTools.dispatch`` and
``Engine.drive``, and the step's check, ``verify``, where the engine's phases
call it).

A step runs from the end of the previous step's commit (for step 1: the start
of ``Engine.drive``) to the end of its own commit, and splits into:

    context   the end of the previous commit to the provider call: budget
              checks, building the CompletionRequest (and the observer
              hand-off of the previous step, none here)
    dispatch  RunTools.dispatch (argument validation, the gate and the tool)
    verify    verify (the criterion, its row and event); only step S
    commit    store.commit_step (one transaction; with durability "full",
              an fsync of the WAL)
    other     the rest: handling the answer, building the step's rows and
              messages, serialising its events

Usage, from the repository root::

    .venv/bin/python bench/step_overhead.py              # S=50, 5 rounds
    .venv/bin/python bench/step_overhead.py --steps 500
    .venv/bin/python bench/step_overhead.py --profile full --steps 500
    .venv/bin/python bench/step_overhead.py --workloads caller   # only the no-op caller tool
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
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
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from io_harness import (
    Budget,
    CompletionRequest,
    CompletionResponse,
    Policy,
    RunOutcome,
    RunResult,
    Store,
    TaskContract,
    ToolCall,
    ToolSpec,
    Usage,
    WorkspaceFileContains,
    run,
)
from io_harness.loop import _acting, _checking
from io_harness.loop import _engine as engine_module
from io_harness.loop._engine import Engine
from io_harness.testing import ScriptedProvider, reply
from io_harness.tools import RunTools

STORES = ("full", "normal", "memory")
STORE_LABELS = {
    "full": "file store, durability=full (WAL, synchronous=FULL)",
    "normal": "file store, durability=normal (WAL, synchronous=NORMAL)",
    "memory": "memory store (Store.memory())",
}
COMPONENTS = ("context", "dispatch", "verify", "commit", "other")
WINDOW = 10
"""Steps in the early window (1..10) and in the late one (the last 10 read_file steps)."""

NOTES = "alpha\nbeta\ngamma\ndelta\nepsilon\n"

WORKLOADS = {"read": ("read_file", {"path": "notes.txt"}), "caller": ("noop", {"n": 1})}
"""Each workload's call per step: a built-in read of a small file, or a no-op caller tool."""


class NoOp:
    """The caller's tool of the ``caller`` workload: it does nothing and says so."""

    def spec(self) -> ToolSpec:
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
        return ToolSpec(name="noop", description="Do nothing.", parameters=schema)

    async def invoke(self, arguments: dict[str, Any]) -> str:
        return "ok"


now = time.perf_counter_ns


# -- timing one step from the outside ----------------------------------------------------


@dataclass(slots=True)
class StepTimes:
    """Timestamps and spans (ns) of one step, as seen by the wrappers."""

    begin: int
    request: int = 0
    answered: int = 0
    dispatch: int = 0
    verify: int = 0
    commit: int = 0
    end: int = 0

    @property
    def provider(self) -> int:
        return self.answered - self.request

    @property
    def harness(self) -> int:
        return self.end - self.begin - self.provider

    def split(self) -> dict[str, int]:
        context = self.request - self.begin
        parts = {
            "context": context,
            "dispatch": self.dispatch,
            "verify": self.verify,
            "commit": self.commit,
        }
        parts["other"] = self.harness - sum(parts.values())
        return parts


@dataclass
class Probe:
    """Collects the StepTimes of one run; the wrappers below write into it."""

    steps: list[StepTimes] = field(default_factory=list)
    current: StepTimes = field(default_factory=lambda: StepTimes(begin=now()))


@dataclass
class _Active:
    """The run being measured: the class-level wrappers find its Probe here."""

    probe: Probe | None = None
    runs: int = 0
    policy: Policy | None = None
    workload: str = "read"


_active_run = _Active()
_original_dispatch = RunTools.dispatch
_original_verify = _checking.verify
_original_drive = Engine.drive


def _active() -> Probe:
    assert _active_run.probe is not None, "a wrapped method ran outside a measured run"
    return _active_run.probe


async def _timed_dispatch(self: RunTools, call: ToolCall, **options: Any) -> Any:
    started = now()
    try:
        return await _original_dispatch(self, call, **options)
    finally:
        _active().current.dispatch += now() - started


async def _timed_verify(engine: Engine, *args: Any, **kwargs: Any) -> bool:
    started = now()
    try:
        return await _original_verify(engine, *args, **kwargs)
    finally:
        _active().current.verify += now() - started


async def _timed_drive(self: Engine, *args: Any, **kwargs: Any) -> Any:
    _active().current = StepTimes(begin=now())
    return await _original_drive(self, *args, **kwargs)


def _install_class_wrappers() -> None:
    RunTools.dispatch = _timed_dispatch  # type: ignore[method-assign]
    # The phases that check import verify by name: each module's name is wrapped.
    _acting.verify = _timed_verify
    engine_module.verify = _timed_verify
    Engine.drive = _timed_drive  # type: ignore[method-assign]


def _wrap_store(store: Store, probe: Probe) -> None:
    commit_step = store.commit_step
    journal_step = store.journal_step

    def timed_commit_step(run_id: str, record: Any) -> None:
        started = now()
        commit_step(run_id, record)
        ended = now()
        step = probe.current
        step.commit += ended - started
        if record.journal_json is not None:
            return  # an acting step's answer, journaled before its calls: part of the step
        step.end = ended
        probe.steps.append(step)
        probe.current = StepTimes(begin=now())

    def timed_journal_step(run_id: str, step_number: int, progress_json: str) -> None:
        started = now()
        journal_step(run_id, step_number, progress_json)
        probe.current.commit += now() - started  # a call's intent: the step's commit cost

    store.commit_step = timed_commit_step  # type: ignore[method-assign]
    store.journal_step = timed_journal_step  # type: ignore[method-assign]


def _provider(steps: int, probe: Probe) -> ScriptedProvider:
    usage = Usage(input_tokens=1200, output_tokens=40)
    name, arguments = WORKLOADS[_active_run.workload]

    def answer(request: CompletionRequest) -> CompletionResponse:
        turn = len(request.messages)
        if turn < 2 * steps - 1:  # the task message, then an assistant and a tool turn per step
            return reply(calls=[ToolCall(id=f"call_{turn}", name=name, arguments=arguments)])
        return reply("I have read it; done.", usage=usage)

    provider = ScriptedProvider(answer)
    complete = provider.complete

    async def timed_complete(request: CompletionRequest) -> CompletionResponse:
        step = probe.current
        step.request = now()
        try:
            return await complete(request)
        finally:
            provider.requests.clear()  # the test helper's log of requests is not the harness's
            step.answered = now()

    provider.complete = timed_complete  # type: ignore[method-assign]
    return provider


# -- one run -------------------------------------------------------------------------------


@dataclass
class Workdir:
    root: Path
    workspace: Path
    stores: Path


def _workdir(base: str | None) -> Workdir:
    root = Path(tempfile.mkdtemp(prefix="ioh-bench-", dir=base))
    workspace = root / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text(NOTES)
    stores = root / "stores"
    stores.mkdir()
    return Workdir(root, workspace, stores)


def _open_store(kind: str, work: Workdir, index: int) -> Store:
    if kind == "memory":
        return Store.memory()
    path = work.stores / f"{kind}-{index}.db"
    return Store.open(path, durability="full" if kind == "full" else "normal")


def _remove_store_files(work: Workdir) -> None:
    for path in work.stores.iterdir():
        if path.is_dir():
            shutil.rmtree(path)  # the store's leases folder
        else:
            path.unlink()


def one_run(
    kind: str,
    steps: int,
    work: Workdir,
    runner: Callable[[Coroutine[Any, Any, RunResult]], RunResult] = asyncio.run,
) -> list[StepTimes]:
    """Run S steps on a fresh store of ``kind``; the StepTimes of each step, in order."""
    _active_run.runs += 1
    probe = Probe()
    _active_run.probe = probe
    store = _open_store(kind, work, _active_run.runs)
    try:
        _wrap_store(store, probe)
        contract = TaskContract.workspace(
            "read notes.txt again and again",
            work.workspace,
            WorkspaceFileContains("notes.txt", "gamma"),
            budget=Budget(max_steps=steps),
        )
        tools = [NoOp()] if _active_run.workload == "caller" else []
        provider = _provider(steps, probe)
        coroutine = run(contract, provider, store=store, policy=_active_run.policy, tools=tools)
        result = runner(coroutine)
    finally:
        _active_run.probe = None
        store.close()
        _remove_store_files(work)
    if result.outcome is not RunOutcome.SUCCESS or result.steps != steps:
        raise SystemExit(f"the benchmark run went wrong: {result.outcome} after {result.steps}")
    if len(probe.steps) != steps:
        raise SystemExit(f"{len(probe.steps)} commits for {steps} steps")
    return probe.steps


# -- figures -------------------------------------------------------------------------------


def us(ns: float) -> str:
    return f"{ns / 1000:8.1f} us"


def _median(values: Sequence[float]) -> float:
    return statistics.median(values)


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class Round:
    """The figures of one run: medians over its read_file steps, and its last step."""

    median: float
    mean: float
    p90: float
    worst: float
    provider: float
    early: float
    late: float
    split: dict[str, float]
    final: StepTimes


def summarise(steps: list[StepTimes]) -> Round:
    tool_steps = steps[:-1]  # the last step is the final reply, checked by the criterion
    costs = [s.harness for s in tool_steps]
    window = min(WINDOW, len(costs))
    splits = [s.split() for s in tool_steps]
    return Round(
        median=_median(costs),
        mean=statistics.fmean(costs),
        p90=_quantile(costs, 0.9),
        worst=max(costs),
        provider=_median([s.provider for s in tool_steps]),
        early=_median(costs[:window]),
        late=_median(costs[-window:]),
        split={c: _median([s[c] for s in splits]) for c in COMPONENTS},
        final=steps[-1],
    )


def memory_run(kind: str, steps: int, work: Workdir) -> tuple[int, int]:
    """Peak traced memory (bytes) during one run, and what is still held after it.

    The peak includes this script's own StepTimes (about 0.3 KiB a step); the
    provider's log of requests is cleared as it goes. Timing runs are separate:
    tracemalloc slows Python down several times.
    """
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        one_run(kind, steps, work)
        _, peak = tracemalloc.get_traced_memory()
        gc.collect()
        current, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - before, current - before


def profile_run(kind: str, steps: int, work: Workdir, top: int) -> None:
    profiler = cProfile.Profile()

    def profiled(coroutine: Coroutine[Any, Any, RunResult]) -> RunResult:
        profiler.enable()
        try:
            return asyncio.run(coroutine)
        finally:
            profiler.disable()

    one_run(kind, steps, work, profiled)
    print(f"cProfile of one run, {STORE_LABELS[kind]}, S={steps} (top {top} by tottime)")
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(top)


def machine_lines(work: Workdir) -> list[str]:
    fs = "?"
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            best = ""
            for line in mounts:
                _dev, point, kind, *_ = line.split()
                if str(work.root).startswith(point) and len(point) > len(best):
                    best, fs = point, kind
    except OSError:
        pass
    return [
        f"python {platform.python_version()} ({sys.implementation.name}), "
        f"sqlite {sqlite3.sqlite_version}, {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f} at start",
        f"store files under {work.root} ({fs})",
    ]


def measure(
    kinds: Sequence[str], steps: int, runs: int, warmup: int, work: Workdir
) -> dict[str, list[Round]]:
    """``runs`` rounds of each kind of store, interleaved so that background load hits all."""
    for _ in range(warmup):
        for kind in kinds:
            one_run(kind, steps, work)
    rounds: dict[str, list[Round]] = {kind: [] for kind in kinds}
    for _ in range(runs):
        for kind in kinds:
            rounds[kind].append(summarise(one_run(kind, steps, work)))
    return rounds


def report(kind: str, rounds: list[Round], steps: int, work: Workdir, *, memory: bool) -> None:
    """Print the figures of one kind of store."""
    print()
    print(f"[{kind}] {STORE_LABELS[kind]}")
    median = _median([r.median for r in rounds])
    early = _median([r.early for r in rounds])
    late = _median([r.late for r in rounds])
    per_round = " ".join(f"{r.median / 1000:.0f}" for r in rounds)
    print(f"  harness cost per step  median {us(median)}   (rounds: {per_round} us)")
    print(f"  harness cost per step  mean   {us(_median([r.mean for r in rounds]))}")
    print(f"  harness cost per step  p90    {us(_median([r.p90 for r in rounds]))}")
    print(f"  harness cost per step  max    {us(_median([r.worst for r in rounds]))}")
    print(f"  early steps            median {us(early)}")
    print(f"  late steps             median {us(late)}")
    print(f"  late / early           {late / early:8.2f}x")
    for component in COMPONENTS:
        value = _median([r.split[component] for r in rounds])
        print(f"  split {component:<9}        median {us(value)}  ({value / median:4.0%})")
    provider = _median([r.provider for r in rounds])
    print(f"  provider (excluded)    median {us(provider)}")
    final = rounds[len(rounds) // 2].final
    print(
        f"  final step (reply)     harness {us(final.harness)}, of which "
        f"verify {us(final.verify).strip()}, commit {us(final.commit).strip()}"
    )
    if memory:
        peak, kept = memory_run(kind, steps, work)
        print(
            f"  tracemalloc            peak {peak / 1024:8.1f} KiB during the run, "
            f"{kept / 1024:.1f} KiB still held after it"
        )


def layered_policy() -> Policy:
    """A policy with rules to walk: each read is checked against 33 rules in four layers."""
    policy = Policy.guarded()
    for layer in ("org", "team", "task"):
        policy = policy.layer(layer).deny_read(*(f"private{n}/*" for n in range(9)))
    return policy.layer("reads").allow_read("notes.txt").allow_exec("noop")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="steps per run, S (default 50)")
    parser.add_argument("--runs", type=int, default=5, help="measured rounds (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds first")
    parser.add_argument(
        "--stores",
        default=",".join(STORES),
        help="comma-separated, from full,normal,memory (default all)",
    )
    parser.add_argument(
        "--workloads",
        default=",".join(WORKLOADS),
        help="comma-separated, from read,caller (default both): the call each step makes",
    )
    parser.add_argument("--dir", default=None, help="where the store files go (default: tmp)")
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc run")
    parser.add_argument(
        "--profile", choices=STORES, default=None, help="also cProfile one run on this store"
    )
    parser.add_argument("--top", type=int, default=25, help="profile lines to print")
    parser.add_argument(
        "--policy",
        choices=("default", "layered"),
        default="default",
        help="the run's policy: default (a run's when given none, Policy.default()) or "
        "layered (Policy.guarded() "
        "and three layers of ten rules each, the read allowed by the last rule)",
    )
    args = parser.parse_args(argv)
    kinds = [k.strip() for k in args.stores.split(",") if k.strip()]
    if not kinds or any(k not in STORES for k in kinds):
        parser.error(f"--stores takes names from {', '.join(STORES)}")
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    if not workloads or any(w not in WORKLOADS for w in workloads):
        parser.error(f"--workloads takes names from {', '.join(WORKLOADS)}")
    if args.steps < 2 or args.runs < 1:
        parser.error("--steps must be at least 2 and --runs at least 1")

    _install_class_wrappers()
    _active_run.policy = layered_policy() if args.policy == "layered" else None
    work = _workdir(args.dir)
    try:
        for line in machine_lines(work):
            print(line)
        late_from = max(1, args.steps - WINDOW)
        print(f"policy: {args.policy}")
        print(
            f"S={args.steps} steps per run ({args.steps - 1} read_file steps, then a final "
            f"reply checked by the criterion); {args.runs} rounds after {args.warmup} warm-up"
        )
        print(
            "harness cost of a step = its wall time minus the provider's; each figure is taken "
            "over the read_file steps of a round, then the median over rounds"
        )
        print(
            f"early = steps 1-{min(WINDOW, args.steps - 1)}, "
            f"late = steps {late_from}-{args.steps - 1}"
        )
        medians: dict[tuple[str, str], tuple[float, float]] = {}
        for workload in workloads:
            _active_run.workload = workload
            print(f"\nworkload {workload}: each step calls {WORKLOADS[workload][0]}")
            measured = measure(kinds, args.steps, args.runs, args.warmup, work)
            for kind in kinds:
                report(kind, measured[kind], args.steps, work, memory=not args.no_memory)
                rounds = measured[kind]
                medians[kind, workload] = (
                    _median([r.median for r in rounds]),
                    _median([r.split["dispatch"] for r in rounds]),
                )
        if len(workloads) == 2:
            print()
            for kind in kinds:
                (read, read_dispatch), (caller, caller_dispatch) = (
                    medians[kind, "read"],
                    medians[kind, "caller"],
                )
                print(
                    f"[{kind}] no-op caller tool over read_file: step {us(caller - read)}, "
                    f"dispatch {us(caller_dispatch - read_dispatch)}"
                )
        print()
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(f"ru_maxrss of this process (all runs): {maxrss / 1024:.1f} MiB")
        if args.profile:
            print()
            profile_run(args.profile, args.steps, work, args.top)
    finally:
        shutil.rmtree(work.root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
