"""The runner every POSIX backend shares: set up, launch, watch the caps, tear down.

A backend says only how it wraps a command (:class:`~._command.Wrapping`).
:class:`ContainedSandbox` prepares the command (:mod:`._command`: its scratch
folder, its environment, its program, what it may write), acquires its
cgroups, starts the launcher with the backend's steps, hands the command to
one supervising thread (:mod:`._watch`: the output kept, the whole tree
killed at the first cap it reaches) and afterwards makes sure nothing it
started is alive and the scratch folder is gone.

:meth:`ContainedSandbox.service` prepares a long-lived command the same way
(a sandboxed MCP server) and hands back the launcher's command line for the
caller to start and talk to over its pipes; the containment is torn down
when the block ends.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from io_harness._process import feed_stdin, in_thread
from io_harness.errors import SandboxError
from io_harness.sandbox._cgroups import CommandCgroups
from io_harness.sandbox._command import (
    CONFINING_STEPS,
    LAUNCHER,
    Command,
    Wrapping,
    command_env,
    confine_code,
    launcher_rlimits,
    new_scratch,
    resolve_program,
    unstartable,
)
from io_harness.sandbox._disk import TmpfsReader
from io_harness.sandbox._launch import launch_args
from io_harness.sandbox._shield import Shield
from io_harness.sandbox._types import (
    NetCheck,
    SandboxConfig,
    SandboxEvent,
    SandboxLimits,
    SandboxMode,
    SandboxOutcome,
)
from io_harness.sandbox._watch import Watch, disk_meter, kill_tree

if TYPE_CHECKING:
    from io_harness.sandbox._proxy import ProxyDecision

__all__ = ["ContainedSandbox", "Service"]


@dataclass(frozen=True, slots=True)
class Service:
    """A long-lived sandboxed command, ready to start: see :meth:`ContainedSandbox.service`."""

    argv: tuple[str, ...]
    """The launcher's command line; started as given, it becomes the command, contained."""
    env: Mapping[str, str]
    """The whole environment to start it with (the proxy's socket in it, when there is one)."""
    cwd: Path
    """The folder to start the launcher in (it enters the command's own folder itself)."""
    backend: str
    undone: list[str] = field(default_factory=list)
    """Once the block has ended: what the command did to files that run code later, undone
    (:meth:`~io_harness.sandbox._code_later.CodeLater.undo`)."""


class ContainedSandbox(abc.ABC):
    """A backend that runs commands through the launcher; subclasses say how they wrap."""

    backend_name = "floor"
    needs_seccomp = False
    denies_network = False
    helper_processes = 0
    """Processes the wrapper itself keeps in the command's groups (not counted by the cap)."""
    disk_cap = "metered: workdir, scratch, writable folders; killed past it"
    """How this backend holds the disk cap, for ``ioh doctor``."""
    hides_paths = False
    """Whether this backend can cover a path for a command (the harness's store) and bind
    one read-only (an entry that runs code later); see :mod:`._shield`."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self._config = config or SandboxConfig()
        self.selection: tuple[str, ...] = ()
        """The backends :func:`~io_harness.sandbox.select` passed by before this one, and why."""

    @property
    def name(self) -> str:
        """The backend's name, as the trace records it."""
        return self.backend_name

    @property
    def config(self) -> SandboxConfig:
        """The configuration this sandbox enforces."""
        return self._config

    @abc.abstractmethod
    def wrap(self, command: Command) -> Wrapping:
        """How this backend runs ``command``."""

    async def run(
        self,
        argv: Sequence[str],
        *,
        workdir: Path,
        env: Mapping[str, str] | None = None,
        limits: SandboxLimits | None = None,
        mode: SandboxMode | None = None,
        readable: Sequence[Path] = (),
        writable: Sequence[Path] = (),
        stdin: bytes | None = None,
        net_check: NetCheck | None = None,
    ) -> SandboxOutcome:
        """Run ``argv`` (no shell) in ``workdir``; see :class:`~io_harness.sandbox.Sandbox`."""
        limits = limits or self._config.limits
        mode = mode or self._config.mode
        events = [
            SandboxEvent("create", self.name, {"mode": mode, "limits": limits.record()}),
        ]
        scratch = new_scratch("sandbox")
        cgroups: CommandCgroups | None = None
        started = time.monotonic()
        try:
            prepared = self._prepare(
                argv, workdir, None, scratch, env, mode, readable, writable, self._config, limits
            )
            if isinstance(prepared, str):
                return self._unstarted(argv, events, started, prepared)
            command, run_env = prepared
            cgroups = self._cgroups(limits)
            if command.proxy_socket is None:
                outcome = await self._launch(command, run_env, limits, cgroups, stdin, events)
                return _undone(outcome, command.shield)
            async with self._proxy(command, run_env, net_check) as proxy:
                outcome = await self._launch(command, run_env, limits, cgroups, stdin, events)
            return _undone(self._with_net_decisions(outcome, proxy.decisions), command.shield)
        finally:
            await _tear_down(cgroups, scratch, kill=False)

    @contextlib.asynccontextmanager
    async def service(
        self,
        argv: Sequence[str],
        *,
        workdir: Path,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        readable: Sequence[Path] = (),
        config: SandboxConfig | None = None,
        net_check: NetCheck | None = None,
    ) -> AsyncIterator[Service]:
        """Prepare ``argv`` to run for as long as the block lasts; the caller starts it.

        What a command gets, it gets: the scratch folder as its home, the
        cgroups and rlimits of ``config`` (this sandbox's own when ``None``),
        its mode over ``workdir``, its network (with ``allow_list``, the proxy
        for the whole block, asking ``net_check``), and the launcher's guard,
        which ends it if the harness dies. No wall, CPU-time-of-the-block or
        output cap is watched: the caller talks to it over its pipes and
        stops it. It starts in ``cwd`` (``workdir`` when ``None``), which it may
        only read unless it lies in the workdir. Leaving the block kills
        whatever of it is still alive (through its cgroups, where they are
        writable) and removes the scratch folder.

        A program that cannot be found, or an argument or variable that cannot
        be passed, is a :class:`~io_harness.errors.SandboxError`.
        """
        config = config or self._config
        scratch = new_scratch("service")
        cgroups: CommandCgroups | None = None
        prepared: tuple[Command, dict[str, str]] | str = "not prepared"
        undone: list[str] = []
        try:
            prepared = self._prepare(
                argv, workdir, cwd, scratch, env, config.mode, readable, (), config, config.limits
            )
            if isinstance(prepared, str):
                raise SandboxError(f"cannot start {argv[0] if argv else ''!r}: {prepared}")
            command, service_env = prepared
            cgroups = self._cgroups(config.limits)
            spec, _ = self._spec(command, config.limits, cgroups)
            service = Service(
                argv=_launcher_argv(spec),
                env=service_env,
                cwd=scratch,
                backend=self.name,
                undone=undone,
            )
            async with contextlib.AsyncExitStack() as stack:
                if command.proxy_socket is not None:
                    await stack.enter_async_context(self._proxy(command, service_env, net_check))
                yield service
        finally:
            await _tear_down(cgroups, scratch, kill=True)
            if not isinstance(prepared, str):
                # Dead by now: what it left in files that run code later is undone.
                undone.extend(prepared[0].shield.undo())

    def _prepare(
        self,
        argv: Sequence[str],
        workdir: Path,
        cwd: Path | None,
        scratch: Path,
        env: Mapping[str, str] | None,
        mode: SandboxMode,
        readable: Sequence[Path],
        writable: Sequence[Path],
        config: SandboxConfig,
        limits: SandboxLimits,
    ) -> tuple[Command, dict[str, str]] | str:
        """The command, resolved, and its environment; or why it cannot start."""
        workdir = Path(workdir).resolve()
        start_in = Path(cwd).resolve() if cwd is not None else workdir
        run_env = command_env(scratch, env)
        problem = unstartable(argv, run_env)
        if problem is not None:
            return problem
        program = resolve_program(argv, start_in, run_env["PATH"])
        if program is None:
            return f"{argv[0]}: not found"
        writes = [Path(p).resolve() for p in writable]
        if mode == "workspace_write":
            writes.insert(0, workdir)
        shield = Shield.around(writes) if mode != "full_access" else Shield()
        exposed = shield.exposed(writes)
        if exposed and not self.hides_paths:
            return (
                f"the harness's store ({exposed[0]}) lies in a folder the command may write, "
                f"and the {self.name} sandbox cannot hide it: keep the store outside the "
                "workspace, or use a sandbox that can (bubblewrap)"
            )
        command = Command(
            argv=(program, *argv[1:]),
            workdir=workdir,
            scratch=scratch,
            mode=mode,
            readable=tuple(Path(p).resolve() for p in readable),
            writable=tuple(Path(p).resolve() for p in writable),
            config=config,
            seccomp=self._write_seccomp(scratch, config),
            proxy_socket=scratch / "proxy.sock" if config.network == "allow_list" else None,
            cwd=start_in,
            limits=limits,
            shield=shield,
        )
        return command, run_env

    def _cgroups(self, limits: SandboxLimits) -> CommandCgroups | None:
        if sys.platform != "linux":
            return None
        return CommandCgroups.acquire(limits, self.helper_processes)

    def _proxy(
        self, command: Command, env: dict[str, str], net_check: NetCheck | None
    ) -> contextlib.AbstractAsyncContextManager[Any]:
        """The allow-list proxy on the command's socket; its path goes into ``env``."""
        from io_harness.sandbox._proxy import NetProxy

        assert command.proxy_socket is not None
        env["IOH_PROXY_SOCKET"] = str(command.proxy_socket)
        return NetProxy(
            command.proxy_socket, allow_hosts=command.config.allow_hosts, net_check=net_check
        )

    def _with_net_decisions(
        self, outcome: SandboxOutcome, decisions: Sequence[ProxyDecision]
    ) -> SandboxOutcome:
        """``outcome`` with a ``net`` event for each of the proxy's ``decisions``, before the
        last event (``destroy``)."""
        said = tuple(
            SandboxEvent(
                "net",
                self.name,
                {"target": f"{d.host}:{d.port}", "allowed": d.allowed, "reason": d.reason},
            )
            for d in decisions
        )
        *before, destroyed = outcome.events
        return dataclasses.replace(outcome, events=(*before, *said, destroyed))

    def _write_seccomp(self, scratch: Path, config: SandboxConfig) -> Path | None:
        if not self.needs_seccomp:
            return None
        from io_harness.sandbox._seccomp import seccomp_program

        path = scratch / ".seccomp.bpf"
        path.write_bytes(seccomp_program(deny_network=config.network != "open"))
        return path

    def _unstarted(
        self, argv: Sequence[str], events: list[SandboxEvent], started: float, why: str
    ) -> SandboxOutcome:
        events.append(SandboxEvent("destroy", self.name, {}))
        return SandboxOutcome(
            backend=self.name,
            argv=tuple(argv),
            exit_code=None,
            signal=None,
            cap_hit=None,
            stdout="",
            stderr="",
            truncated=False,
            duration=time.monotonic() - started,
            spawn_error=why,
            events=tuple(events),
        )

    async def _launch(
        self,
        command: Command,
        env: dict[str, str],
        limits: SandboxLimits,
        cgroups: CommandCgroups | None,
        stdin: bytes | None,
        events: list[SandboxEvent],
    ) -> SandboxOutcome:
        started = time.monotonic()
        spec, wrapping = self._spec(command, limits, cgroups)
        watch = Watch(cgroups, limits, started)
        disk = disk_meter(command, limits)
        try:
            proc = _start(spec, command, env)
        except (OSError, ValueError) as exc:  # E2BIG and the like: the command never ran
            return self._unstarted(command.argv, events, started, _describe(exc))
        watch.proc, watch.disk = proc, disk
        if disk is not None and wrapping.private_tmpfs is not None:
            disk.tmpfs = TmpfsReader(wrapping.private_tmpfs, proc.pid)
        if proc.stdin is not None:
            feed_stdin(proc.stdin, stdin or b"")
        try:
            await in_thread(watch.supervise)
        finally:
            kill_tree(proc.pid, cgroups)
            proc.wait()
        return watch.outcome(self.name, command, wrapping, events)

    def _spec(
        self, command: Command, limits: SandboxLimits, cgroups: CommandCgroups | None
    ) -> tuple[list[str], Wrapping]:
        """The launcher's arguments for ``command``, and the backend's wrapping of it."""
        wrapping = self.wrap(command)
        steps = dict(wrapping.launcher)
        if CONFINING_STEPS & steps.keys():
            steps["code"] = confine_code(command)
        spec = launch_args(
            wrapping.argv,
            cgroups=cgroups.paths if cgroups else [],
            rlimits=launcher_rlimits(limits, cgroups),
            cwd=str(command.cwd),
            # The launcher's guard needs pidfds to watch the harness (Linux).
            parent=os.getpid()
            if sys.platform == "linux" and not wrapping.dies_with_harness
            else None,
            scratch=str(command.scratch),
            **steps,
        )
        return spec, wrapping


def _undone(outcome: SandboxOutcome, shield: Shield) -> SandboxOutcome:
    """``outcome`` with what the command did to files that run code later undone and said
    (an ``undone`` event before the last, ``destroy``)."""
    undone = shield.undo()
    if not undone:
        return outcome
    *before, destroyed = outcome.events
    said = SandboxEvent("undone", outcome.backend, {"undone": list(undone)})
    return dataclasses.replace(outcome, undone=undone, events=(*before, said, destroyed))


async def _tear_down(cgroups: CommandCgroups | None, scratch: Path, *, kill: bool) -> None:
    """Release the command's cgroups (with ``kill``, killing what is left in them first),
    then remove its scratch folder."""
    if cgroups is not None and not cgroups.released:
        if kill:
            cgroups.kill()
        await in_thread(cgroups.release)
    shutil.rmtree(scratch, ignore_errors=True)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _launcher_argv(spec: list[str]) -> tuple[str, ...]:
    """The command line that runs the launcher with ``spec``: isolated from the user's
    site and environment, writing no bytecode."""
    return (sys.executable, "-I", "-S", "-B", str(LAUNCHER), *spec)


def _start(spec: list[str], command: Command, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start the launcher in a new session."""
    return subprocess.Popen(
        _launcher_argv(spec),
        cwd=command.scratch,
        env=dict(env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
