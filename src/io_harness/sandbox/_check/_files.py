"""Cases of what a command may read, write and start."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from io_harness.sandbox._check._trial import (
    Case,
    CaseSkipped,
    Trial,
    expect,
    named,
    open_folder,
)

_FLOOR = "confines no writes"


async def reading_the_workspace_works(trial: Trial) -> None:
    outcome = await trial.python_run("print(open('notes.txt').read(), end='')")
    expect(outcome.exit_code == 0, "the command could not read notes.txt", outcome)
    expect(outcome.stdout == "in the workspace\n", "notes.txt read wrong", outcome)
    expect(outcome.cap_hit is None, "a cap was hit by a read", outcome)
    expect(bool(outcome.backend), "the outcome names no backend", outcome)


async def writing_the_workspace_works(trial: Trial) -> None:
    outcome = await trial.python_run("open('made.txt', 'w').write('made')")
    expect(outcome.exit_code == 0, "the command could not write the workspace", outcome)
    made = trial.workspace / "made.txt"
    expect(made.is_file() and made.read_text() == "made", "made.txt is not in the workspace")


async def writes_outside_the_workspace_fail(trial: Trial) -> None:
    trial.needs(trial.promises.confines_writes, _FLOOR)
    target = trial.outside / "escaped.txt"
    outcome = await trial.python_run(f"open({str(target)!r}, 'w').write('out')")
    expect(outcome.exit_code != 0, "a write outside the workspace succeeded", outcome)
    expect(not target.exists(), f"{target} was written from inside the sandbox")


async def read_only_mode_refuses_workspace_writes(trial: Trial) -> None:
    trial.needs(trial.promises.confines_writes, _FLOOR)
    argv = [trial.python, "-c", "open('made.txt', 'w').write('made')"]
    outcome = await trial.sandbox().run(argv, workdir=trial.workspace, mode="read_only")
    expect(outcome.exit_code != 0, "read_only let the command write the workspace", outcome)
    expect(not (trial.workspace / "made.txt").exists(), "made.txt was written in read_only")


async def the_kernels_global_settings_are_not_writable(trial: Trial) -> None:
    # A root harness's command mapped to the host's root, in a /proc of its own, once
    # found /proc/sys writable: core_pattern runs a program as root on the next crash.
    # The value written is the one already there, so a failure here harms nothing.
    trial.needs(trial.promises.confines_writes, _FLOOR)
    if not Path("/proc/sys/kernel/core_pattern").exists():
        raise CaseSkipped("this machine has no /proc/sys/kernel/core_pattern")
    outcome = await trial.python_run(
        """
        path = "/proc/sys/kernel/core_pattern"
        value = open(path).read()
        try:
            with open(path, "w") as handle:
                handle.write(value)
        except OSError as exc:
            print("refused", exc.errno)
        else:
            print("written")
        """
    )
    expect(outcome.exit_code == 0, "the probe did not run", outcome)
    expect(outcome.stdout.startswith("refused"), "core_pattern was writable", outcome)


async def a_program_in_a_folder_the_sandbox_makes_private_still_runs(trial: Trial) -> None:
    # A clone (and its virtualenv) under /tmp: a sandbox that gives the command a /tmp
    # of its own must bind the program back.
    folder = open_folder()
    try:
        program = folder / "say-hello"
        program.write_text("#!/bin/sh\necho hello from $0\n")
        program.chmod(0o755)
        outcome = await trial.sandbox().run([str(program)], workdir=trial.workspace)
        expect(outcome.exit_code == 0, f"{program} did not run", outcome)
        expect(outcome.stdout == f"hello from {program}\n", "the program said wrong", outcome)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def the_scratch_folder_is_gone(trial: Trial) -> None:
    outcome = await trial.python_run(
        "import os; home = os.environ['HOME']; open(home + '/x', 'w').write('x'); print(home)"
    )
    expect(outcome.exit_code == 0, "the command could not write its HOME", outcome)
    scratch = Path(outcome.stdout.strip())
    expect(scratch != Path.home(), "the command's HOME is the harness's own", outcome)
    expect(not scratch.exists(), f"the command's scratch folder {scratch} is still there")


async def the_harness_environment_does_not_leak(trial: Trial) -> None:
    os.environ["IOH_CHECK_SECRET_KEY"] = "sk-not-for-commands"
    try:
        outcome = await trial.python_run("import os; print(os.environ.get('IOH_CHECK_SECRET_KEY'))")
    finally:
        del os.environ["IOH_CHECK_SECRET_KEY"]
    expect(outcome.stdout == "None\n", "the harness's environment reached the command", outcome)


async def a_missing_program_is_a_spawn_error(trial: Trial) -> None:
    outcome = await trial.sandbox().run(["no-such-program-ioh"], workdir=trial.workspace)
    expect(outcome.spawn_error is not None, "a missing program is not a spawn error", outcome)
    expect("not found" in (outcome.spawn_error or ""), "the spawn error does not say not found")
    expect(outcome.exit_code is None, "a command that never started has an exit status")


_UNRUNNABLE: dict[str, tuple[list[str], dict[str, str] | None, str]] = {
    "nul_in_argv": (["python3", "-c", "print(1)", "a\0b"], None, "NUL byte"),
    "nul_in_env": (["python3", "-c", "print(1)"], {"KEY": "a\0b"}, "cannot be passed"),
    "equals_in_env_name": (["python3", "-c", "print(1)"], {"A=B": "c"}, "cannot be passed"),
    "argv_too_long": (["python3", "-c", "print(1)", *(["x" * 100_000] * 40)], None, "too long"),
    "empty_argv": ([], None, "no command"),
}


def _unrunnable(kind: str) -> Case:
    argv, env, why = _UNRUNNABLE[kind]

    async def case(trial: Trial) -> None:
        # The exec tool's argv comes from the model: a bad one is an outcome, never a raise.
        outcome = await trial.sandbox().run(argv, workdir=trial.workspace, env=env)
        expect(outcome.spawn_error is not None, f"a command with {kind} started", outcome)
        expect(why in (outcome.spawn_error or ""), f"the spawn error does not say {why!r}")
        expect(outcome.exit_code is None, "a command that never started has an exit status")

    case.__name__ = f"an_argv_that_cannot_be_executed_is_a_spawn_error_{kind}"
    return case


CASES = named(
    reading_the_workspace_works,
    writing_the_workspace_works,
    writes_outside_the_workspace_fail,
    read_only_mode_refuses_workspace_writes,
    the_kernels_global_settings_are_not_writable,
    a_program_in_a_folder_the_sandbox_makes_private_still_runs,
    the_scratch_folder_is_gone,
    the_harness_environment_does_not_leak,
    a_missing_program_is_a_spawn_error,
    *(_unrunnable(kind) for kind in _UNRUNNABLE),
)
