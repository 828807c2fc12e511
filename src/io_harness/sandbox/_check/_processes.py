"""Cases of the command's processes: nothing it starts outlives it, and the trace says what ran."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from io_harness.sandbox._check._trial import (
    Case,
    Trial,
    expect,
    linger,
    named,
    processes_with,
)

_WAIT_FOR_START = 30.0
"""How long a case waits for a command it started in the background to say it runs."""


def _escaper(escape: str) -> Case:
    async def case(trial: Trial) -> None:
        token = f"ioh-escaper-{uuid.uuid4().hex}"
        if escape == "setsid":
            body = f"if os.fork() == 0:\n    os.setsid()\n    {linger(token)}"
        else:
            body = (
                f"if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
                f"        {linger(token)}\n    os._exit(0)"
            )
        code = f"import os, sys, time\n{body}\ntime.sleep(0.5)\nprint('leader done')"
        argv = [trial.python, "-c", code]
        outcome = await trial.sandbox().run(argv, workdir=trial.workspace)
        expect(outcome.exit_code == 0, "the leader did not end well", outcome)
        expect(outcome.stdout == "leader done\n", "the leader said wrong", outcome)
        left = processes_with(token)
        expect(left == [], f"a {escape} child outlived the command: pids {left}")

    case.__name__ = f"escapers_are_killed_{escape.replace('-', '_')}"
    return case


def _daemonising(token: str, started: Path) -> str:
    """A command that starts a detached child, writes its HOME into ``started``, and waits."""
    return (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        f"    {linger(token)}\n"
        f"open({str(started)!r}, 'w').write(os.environ['HOME'])\n"
        "time.sleep(600)"
    )


async def nothing_survives_a_cap_kill(trial: Trial) -> None:
    token = f"ioh-survivor-{uuid.uuid4().hex}"
    code = _daemonising(token, trial.workspace / "started")
    argv = [trial.python, "-c", code]
    outcome = await trial.sandbox(wall_seconds=2).run(argv, workdir=trial.workspace)
    expect(outcome.cap_hit == "wall", "the command was not killed at a 2 s wall cap", outcome)
    left = processes_with(token)
    expect(left == [], f"a detached child outlived the cap kill: pids {left}")


async def a_cancelled_run_leaves_nothing_behind(trial: Trial) -> None:
    token = f"ioh-cancelled-{uuid.uuid4().hex}"
    started = trial.workspace / "started"
    argv = [trial.python, "-c", _daemonising(token, started)]
    run = asyncio.ensure_future(trial.sandbox().run(argv, workdir=trial.workspace))
    try:
        for _ in range(int(_WAIT_FOR_START / 0.05)):
            if started.exists() and started.read_text():
                break
            if run.done():
                expect(False, "the command ended before it was cancelled", run.result())
            await asyncio.sleep(0.05)
        expect(started.exists(), f"the command did not start within {_WAIT_FOR_START:.0f} s")
    finally:
        run.cancel()
        await asyncio.wait([run])  # not ``await run``: a cancel of the check itself goes on up
    expect(run.cancelled(), "the cancelled run returned an outcome instead of being cancelled")
    left = processes_with(token)
    expect(left == [], f"a detached child outlived the cancel: pids {left}")
    scratch = Path(started.read_text())
    expect(not scratch.exists(), f"the scratch folder {scratch} outlived the cancel")


async def events_trace_the_command(trial: Trial) -> None:
    outcome = await trial.python_run("import time; time.sleep(600)", wall_seconds=1)
    kinds = [event.kind for event in outcome.events]
    expect(kinds == ["create", "exec", "cap_hit", "destroy"], f"the events are {kinds}")
    created = outcome.events[0].detail.get("limits", {})
    expect(created.get("wall_seconds") == 1, "the create event does not hold the limits")
    expect(outcome.events[2].detail == {"cap": "wall"}, "the cap_hit event does not say wall")


CASES = named(
    _escaper("setsid"),
    _escaper("double-fork"),
    nothing_survives_a_cap_kill,
    a_cancelled_run_leaves_nothing_behind,
    events_trace_the_command,
)
