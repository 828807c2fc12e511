"""What one case of the sandbox check is given, and how it says it failed or does not apply."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from io_harness.sandbox._types import Sandbox, SandboxConfig, SandboxLimits, SandboxOutcome

SandboxFactory = Callable[[SandboxConfig], Sandbox]
"""Makes the sandbox under check from the configuration a case needs."""


class CaseFailed(Exception):
    """The sandbox broke the case's promise; the message says how."""


class CaseSkipped(Exception):
    """The case does not apply to this sandbox or machine; the message says why."""


@dataclass(frozen=True, slots=True)
class Promises:
    """What the sandbox under check says it does, so cases it never claimed are skipped."""

    confines_writes: bool
    denies_network: bool
    allow_list: bool


@dataclass(frozen=True, slots=True)
class Trial:
    """One case's world: the sandbox's factory, a workspace, a folder outside it, a Python."""

    factory: SandboxFactory
    promises: Promises
    workspace: Path
    outside: Path
    python: str

    def sandbox(self, **limits: Any) -> Sandbox:
        """The sandbox under check, with the case's caps (a minute of wall time unless set)."""
        config = SandboxConfig(
            limits=SandboxLimits(**{"wall_seconds": 60, **limits}), accept_floor=True
        )
        return self.factory(config)

    async def python_run(self, code: str, **limits: Any) -> SandboxOutcome:
        """Run ``code`` with the trial's Python in the workspace."""
        argv = [self.python, "-c", textwrap.dedent(code)]
        return await self.sandbox(**limits).run(argv, workdir=self.workspace)

    def needs(self, promise: bool, why: str) -> None:
        """Skip the case unless the sandbox makes ``promise``."""
        if not promise:
            raise CaseSkipped(why)


def expect(holds: bool, wanted: str, outcome: SandboxOutcome | None = None) -> None:
    """Fail the case with ``wanted`` (and how the command ended) unless ``holds``."""
    if holds:
        return
    if outcome is None:
        raise CaseFailed(wanted)
    told = f"{wanted}; the command: {outcome.summary}"
    for stream, text in (("stdout", outcome.stdout), ("stderr", outcome.stderr)):
        if text.strip():
            told += f"; {stream} ends {text.strip()[-300:]!r}"
    raise CaseFailed(told)


def open_folder() -> Path:
    """A folder anyone may write, owned by ``nobody`` when the harness is root.

    A sandbox may run commands as another user (this project's do, as root): the
    folders a case makes must not be what stops a write, so that only the sandbox can.
    """
    folder = Path(tempfile.mkdtemp(prefix="ioh-check-"))
    folder.chmod(0o777)
    if sys.platform != "win32" and os.geteuid() == 0:
        from io_harness.sandbox._linux import NOBODY

        os.chown(folder, NOBODY, NOBODY)
    return folder


@contextmanager
def trial_of(factory: SandboxFactory, promises: Promises, python: str) -> Iterator[Trial]:
    """A fresh workspace (holding ``notes.txt``) and outside folder for one case."""
    workspace, outside = open_folder(), open_folder()
    try:
        (workspace / "notes.txt").write_text("in the workspace\n")
        yield Trial(factory, promises, workspace, outside, python)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
        shutil.rmtree(outside, ignore_errors=True)


def processes_with(token: str) -> list[int]:
    """Every process on the machine whose command line holds ``token``."""
    proc = Path("/proc")
    if not proc.is_dir():
        raise CaseSkipped("cannot list the machine's processes here (no /proc)")
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(entry.name))
    return found


def linger(token: str) -> str:
    """Code that re-executes Python with ``token`` in its command line, so it can be found."""
    return (
        "os.execv(sys.executable, "
        f"[sys.executable, '-c', 'import time; time.sleep(600)', {token!r}])"
    )


Case = Callable[[Trial], Coroutine[Any, Any, None]]
"""One promise, tried: returns when it held, raises :class:`CaseFailed` or :class:`CaseSkipped`."""


def named(*cases: Case) -> dict[str, Case]:
    """Cases by their functions' names, which say the promise."""
    return {case.__name__: case for case in cases}
