"""A command as a POSIX backend sees it, and what its preparation is made of.

:class:`Command` is one command with everything resolved: its program an
absolute path, its folders, its mode, its caps. :class:`Wrapping` is what a
backend answers when asked how it runs one. The rest prepares a command
before its launcher starts: its private scratch folder, its environment (a
few of the harness's variables, never its secrets), its program found, its
rlimits, and the launcher's compiled confining code.
"""

from __future__ import annotations

import functools
import marshal
import math
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from io_harness._scratch import sweep
from io_harness.sandbox._cgroups import CommandCgroups
from io_harness.sandbox._disk import PrivateTmpfs
from io_harness.sandbox._shield import Shield
from io_harness.sandbox._types import SandboxConfig, SandboxLimits, SandboxMode

__all__ = [
    "CONFINING_STEPS",
    "LAUNCHER",
    "Command",
    "Wrapping",
    "command_env",
    "confine_code",
    "launcher_rlimits",
    "new_scratch",
    "resolve_program",
    "unstartable",
]

LAUNCHER = Path(__file__).with_name("_launch.py")
_BASE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "SYSTEMROOT", "PATHEXT")
"""What a command takes from the harness's environment (Windows programs need the last two)."""


@dataclass(frozen=True, slots=True)
class Command:
    """One command as a backend sees it, everything resolved."""

    argv: tuple[str, ...]
    """The command, its program an absolute path."""
    workdir: Path
    scratch: Path
    """The command's private folder (its HOME), removed afterwards."""
    mode: SandboxMode
    readable: tuple[Path, ...]
    writable: tuple[Path, ...]
    config: SandboxConfig
    seccomp: Path | None
    """The compiled seccomp filter, when the backend asked for one."""
    proxy_socket: Path | None
    """Where the allow-list proxy listens, with ``network="allow_list"``."""
    cwd: Path
    """Where the command starts: the workdir, unless a service names another folder."""
    limits: SandboxLimits
    """The caps it runs under (a run's own, which may differ from ``config.limits``)."""
    shield: Shield = field(default_factory=Shield)
    """What it may neither change nor see: entries that run code later, the harness's own
    files (:mod:`._shield`)."""

    def writable_paths(self) -> list[Path]:
        """Every folder the command may write, by its mode."""
        paths = [self.scratch, *self.writable]
        if self.mode == "workspace_write":
            paths.append(self.workdir)
        return paths


@dataclass(frozen=True, slots=True)
class Wrapping:
    """How a backend wraps a command: what the launcher does, then what it executes."""

    argv: tuple[str, ...]
    """What the launcher executes: the command, or a wrapper that runs it."""
    launcher: Mapping[str, Any] = field(default_factory=dict)
    """Steps for the launcher: ``uid``/``gid``, ``landlock`` (writable paths), ``seccomp``,
    ``fds`` (files to open at given descriptors)."""
    signal_in_status: bool = False
    """The wrapper reports a command killed by signal N as exit status 128 + N."""
    dies_with_harness: bool = False
    """The wrapper ends the command's whole tree if the harness dies (bubblewrap's
    ``--die-with-parent`` in a pid namespace): the launcher leaves no guard behind."""
    private_tmpfs: PrivateTmpfs | None = None
    """A tmpfs the wrapper mounts in the command's own mount namespace, which the disk
    cap counts (bubblewrap's ``/tmp``)."""


CONFINING_STEPS = {"landlock", "seccomp", "lend", "need", "mask"}
"""The launcher's steps that load ``_confine.py`` (ctypes): its code is handed over compiled."""


@functools.cache
def _confine_compiled() -> bytes:
    source = LAUNCHER.with_name("_confine.py")
    return marshal.dumps(compile(source.read_bytes(), str(source), "exec"))


def confine_code(command: Command) -> str:
    """The path of ``_confine.py``'s compiled code for ``command``'s launchers (``--code``),
    written in its scratch folder, which nothing else writes before its launcher reads it."""
    code = command.scratch / ".confine.code"
    if not code.exists():
        code.write_bytes(_confine_compiled())
    return str(code)


@functools.cache
def _swept(kind: str) -> None:
    sweep(kind)


def new_scratch(kind: str) -> Path:
    """A command's private folder ``ioh-KIND-PID-…``, named by this process's pid so that
    one a killed harness left behind goes at the next harness's first command."""
    _swept(kind)
    return Path(tempfile.mkdtemp(prefix=f"ioh-{kind}-{os.getpid()}-"))


def launcher_rlimits(limits: SandboxLimits, cgroups: CommandCgroups | None) -> dict[str, list[int]]:
    """The rlimits the launcher sets for ``limits``: those the cgroups do not hold already,
    none above the harness's own hard limits."""
    cpu = math.ceil(limits.cpu_seconds)
    chosen = {
        "RLIMIT_CPU": [cpu, cpu + 1],  # SIGXCPU at the cap, SIGKILL a second later
        "RLIMIT_FSIZE": [limits.file_size_bytes] * 2,
        "RLIMIT_CORE": [0, 0],
        "RLIMIT_NOFILE": [limits.open_files] * 2,
    }
    if cgroups is None or not cgroups.caps_memory:
        chosen["RLIMIT_AS"] = [limits.memory_bytes] * 2
    if (cgroups is None or not cgroups.caps_processes) and os.geteuid() != 0:
        chosen["RLIMIT_NPROC"] = [limits.processes] * 2
    # Never ask for more than the harness itself may have.
    import resource  # POSIX only: this module is imported on Windows too

    for name, pair in chosen.items():
        _, hard = resource.getrlimit(getattr(resource, name))
        if hard != resource.RLIM_INFINITY:
            chosen[name] = [min(value, hard) for value in pair]
    return chosen


def unstartable(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """Why ``argv`` with ``env`` cannot be executed at all, if it cannot."""
    if not argv or not argv[0]:
        return "no command given"
    if any("\0" in arg for arg in argv):
        return "an argument holds a NUL byte"
    for key, value in env.items():
        if not key or "=" in key or "\0" in key or "\0" in value:
            return f"the environment variable {key!r} cannot be passed"
    return None


def resolve_program(argv: Sequence[str], workdir: Path, path: str) -> str | None:
    """The absolute path of ``argv``'s program: a path it names is taken from ``workdir``,
    a bare name is looked up on ``path``; ``None`` when there is no such executable."""
    program = argv[0]
    if "/" in program:
        candidate = workdir / program
        return str(candidate) if os.access(candidate, os.X_OK) else None
    return shutil.which(program, path=path)


def command_env(scratch: Path, extra: Mapping[str, str] | None) -> dict[str, str]:
    """A command's environment: a few of the harness's variables, its scratch folder as
    home and temporary folder, then ``extra``. The rest of the harness's environment
    (API keys among it) never reaches a command."""
    env = {key: os.environ[key] for key in _BASE_ENV_KEYS if key in os.environ}
    env.setdefault("PATH", os.defpath)
    home = str(scratch)
    env.update(HOME=home, TMPDIR=home, TEMP=home, TMP=home)
    env.update(extra or {})
    return env
