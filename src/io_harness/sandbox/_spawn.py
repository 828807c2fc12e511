"""The runner every POSIX backend shares: set up, launch, watch the caps, tear down.

A backend says only how it wraps a command (:class:`Wrapping`). This module
makes the scratch folder and the cgroups, starts the launcher, keeps the
output, kills the whole tree at the first cap it reaches, and afterwards
makes sure nothing it started is alive and the scratch folder is gone.

:meth:`ContainedSandbox.service` prepares a long-lived command the same way
(a sandboxed MCP server) and hands back the launcher's command line for the
caller to start and talk to over its pipes; the containment is torn down
when the block ends.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import functools
import marshal
import math
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from io_harness._process import OUTPUT_CAP_BYTES, CappedOutput, Stream, _feed, in_thread
from io_harness._scratch import sweep
from io_harness.errors import SandboxError
from io_harness.sandbox._cgroups import CommandCgroups
from io_harness.sandbox._disk import DiskMeter, PrivateTmpfs, TmpfsReader
from io_harness.sandbox._launch import launch_args
from io_harness.sandbox._shield import Shield
from io_harness.sandbox._types import (
    Cap,
    NetCheck,
    SandboxConfig,
    SandboxEvent,
    SandboxLimits,
    SandboxMode,
    SandboxOutcome,
    ended_events,
)

__all__ = [
    "LAUNCHER",
    "Command",
    "ContainedSandbox",
    "Service",
    "Wrapping",
    "command_env",
    "confine_code",
]

LAUNCHER = Path(__file__).with_name("_launch.py")
_LAUNCH_FAILED = 125
_LAUNCH_MARK = "ioh-launch:"
_POLL_SECONDS = 0.05
_DRAIN_SECONDS = 2.0
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


_CONFINING_STEPS = {"landlock", "seccomp", "lend", "need", "mask"}
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


def _undone(outcome: SandboxOutcome, shield: Shield) -> SandboxOutcome:
    """``outcome`` with what the command did to files that run code later undone and said
    (an ``undone`` event before the last, ``destroy``)."""
    undone = shield.undo()
    if not undone:
        return outcome
    *before, destroyed = outcome.events
    said = SandboxEvent("undone", outcome.backend, {"undone": list(undone)})
    return dataclasses.replace(outcome, undone=undone, events=(*before, said, destroyed))


@functools.cache
def _swept(kind: str) -> None:
    sweep(kind)


def _scratch(kind: str) -> Path:
    """A command's private folder ``ioh-KIND-PID-…``, named by this process's pid so that
    one a killed harness left behind goes at the next harness's first command."""
    _swept(kind)
    return Path(tempfile.mkdtemp(prefix=f"ioh-{kind}-{os.getpid()}-"))


def _rlimits(limits: SandboxLimits, cgroups: CommandCgroups | None) -> dict[str, list[int]]:
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


def _unstartable(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """Why ``argv`` with ``env`` cannot be executed at all, if it cannot."""
    if not argv or not argv[0]:
        return "no command given"
    if any("\0" in arg for arg in argv):
        return "an argument holds a NUL byte"
    for key, value in env.items():
        if not key or "=" in key or "\0" in key or "\0" in value:
            return f"the environment variable {key!r} cannot be passed"
    return None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _resolve_program(argv: Sequence[str], workdir: Path, path: str) -> str | None:
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
        scratch = _scratch("sandbox")
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
            decisions = tuple(
                SandboxEvent(
                    "net",
                    self.name,
                    {"target": f"{d.host}:{d.port}", "allowed": d.allowed, "reason": d.reason},
                )
                for d in proxy.decisions
            )
            *before, destroyed = outcome.events
            outcome = dataclasses.replace(outcome, events=(*before, *decisions, destroyed))
            return _undone(outcome, command.shield)
        finally:
            if cgroups is not None and not cgroups.released:
                await in_thread(cgroups.release)
            shutil.rmtree(scratch, ignore_errors=True)

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
        scratch = _scratch("service")
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
                argv=(sys.executable, "-I", "-S", "-B", str(LAUNCHER), *spec),
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
            if cgroups is not None and not cgroups.released:
                cgroups.kill()
                await in_thread(cgroups.release)
            shutil.rmtree(scratch, ignore_errors=True)
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
        problem = _unstartable(argv, run_env)
        if problem is not None:
            return problem
        program = _resolve_program(argv, start_in, run_env["PATH"])
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
        watch = _Watch(cgroups, started + limits.wall_seconds)
        output = CappedOutput(
            min(limits.output_bytes, OUTPUT_CAP_BYTES),
            limit=limits.output_bytes,
            on_limit=lambda: watch.hit("output"),
        )
        disk = _disk_meter(command, limits)
        try:
            proc = _start(spec, command, env)
        except (OSError, ValueError) as exc:  # E2BIG and the like: the command never ran
            return self._unstarted(command.argv, events, started, _describe(exc))
        watch.proc, watch.disk = proc, disk
        if disk is not None and wrapping.private_tmpfs is not None:
            disk.tmpfs = TmpfsReader(wrapping.private_tmpfs, proc.pid)
        if proc.stdin is not None:
            _feed(proc.stdin, stdin or b"")
        try:
            await in_thread(lambda: watch.supervise(output))
        finally:
            _kill_tree(proc.pid, cgroups)
            proc.wait()
        return self._ended(command, limits, wrapping, watch, output, started, events)

    def _ended(
        self,
        command: Command,
        limits: SandboxLimits,
        wrapping: Wrapping,
        watch: _Watch,
        output: CappedOutput,
        started: float,
        events: list[SandboxEvent],
    ) -> SandboxOutcome:
        """The outcome of a command whose whole tree has ended."""
        assert watch.proc is not None
        first_cap = watch.first_cap
        status = _Status.of(watch.proc.returncode, wrapping)
        cap = first_cap[0] if first_cap else _cap_after(status.signal, limits, watch.cpu_spent_ns)
        duration = time.monotonic() - started
        stderr = output.text("stderr")
        spawn_error = None
        if status.exit_code == _LAUNCH_FAILED and _LAUNCH_MARK in stderr:
            spawn_error = stderr.split(_LAUNCH_MARK, 1)[1].strip().splitlines()[0]
        written = watch.disk.written if watch.disk is not None and cap == "disk" else None
        detail = {"written_bytes": written} if cap == "disk" else {}
        events += ended_events(self.name, command.argv, duration, cap, detail)
        return SandboxOutcome(
            backend=self.name,
            argv=command.argv,
            exit_code=status.exit_code,
            signal=status.signal,
            cap_hit=cap,
            stdout=output.text("stdout"),
            stderr=stderr,
            # Killed at the output cap, the command's output ends early even if none was cut.
            truncated=output.truncated or cap == "output",
            duration=duration,
            spawn_error=spawn_error,
            events=tuple(events),
            written_bytes=written,
        )

    def _spec(
        self, command: Command, limits: SandboxLimits, cgroups: CommandCgroups | None
    ) -> tuple[list[str], Wrapping]:
        """The launcher's arguments for ``command``, and the backend's wrapping of it."""
        wrapping = self.wrap(command)
        steps = dict(wrapping.launcher)
        if _CONFINING_STEPS & steps.keys():
            steps["code"] = confine_code(command)
        spec = launch_args(
            wrapping.argv,
            cgroups=cgroups.paths if cgroups else [],
            rlimits=_rlimits(limits, cgroups),
            cwd=str(command.cwd),
            # The launcher's guard needs pidfds to watch the harness (Linux).
            parent=os.getpid()
            if sys.platform == "linux" and not wrapping.dies_with_harness
            else None,
            scratch=str(command.scratch),
            **steps,
        )
        return spec, wrapping


class _Watch:
    """Watches one command for its caps and kills the whole tree at the first."""

    def __init__(self, cgroups: CommandCgroups | None, deadline: float) -> None:
        self.cgroups, self.deadline = cgroups, deadline
        self.proc: subprocess.Popen[bytes] | None = None
        self.disk: DiskMeter | None = None
        self.first_cap: list[Cap] = []
        self.cpu_spent_ns = 0
        self._lock = threading.Lock()

    def hit(self, cap: Cap) -> None:
        with self._lock:
            if not self.first_cap:
                self.first_cap.append(cap)
        if self.proc is not None:
            _kill_tree(self.proc.pid, self.cgroups)

    def supervise(self, output: CappedOutput) -> None:
        """Until the tree has ended: keep its output, watch its caps, kill at the first.

        One thread waits on the leader's pidfd and both pipes at once, so an exit
        is seen at once. After the leader ends, the rest of the tree is killed
        (survivors would hold the pipes open) and the pipes are read to the end.
        """
        proc = self.proc
        assert proc is not None and proc.stdout is not None and proc.stderr is not None
        pipes: tuple[tuple[IO[bytes], Stream], ...] = (
            (proc.stdout, "stdout"),
            (proc.stderr, "stderr"),
        )
        with selectors.DefaultSelector() as selector:
            for pipe, name in pipes:
                os.set_blocking(pipe.fileno(), False)
                selector.register(pipe, selectors.EVENT_READ, name)
            exit_seen = _exit_watch(proc.pid)
            if exit_seen is not None:
                selector.register(exit_seen, selectors.EVENT_READ, None)
            drain_deadline: float | None = None
            while selector.get_map():
                for key, _ in selector.select(_POLL_SECONDS):
                    if key.data is None or not _read_into(key.fileobj, output, key.data):
                        selector.unregister(key.fileobj)
                if drain_deadline is None:
                    if proc.poll() is None:
                        self._check_caps()
                        continue
                    _kill_tree(proc.pid, self.cgroups)
                    drain_deadline = time.monotonic() + _DRAIN_SECONDS
                    if exit_seen is not None and exit_seen in selector.get_map():
                        selector.unregister(exit_seen)
                elif time.monotonic() > drain_deadline:
                    break
            if exit_seen is not None:
                os.close(exit_seen)
        proc.stdout.close()
        proc.stderr.close()
        if self.cgroups is not None:
            # Read the counters before the groups go: an OOM kill shows only there.
            if not self.first_cap and (cap := self.cgroups.cap_hit()) is not None:
                self.first_cap.append(cap)
            self.cpu_spent_ns = self.cgroups.cpu_used_ns()
            self.cgroups.release()
        # What was written since the last look: a command can end within one.
        if self.disk is not None and not self.first_cap and self.disk.finish():
            self.first_cap.append("disk")

    def _check_caps(self) -> None:
        if time.monotonic() >= self.deadline:
            self.hit("wall")
        elif self.cgroups is not None and (cap := self.cgroups.cap_hit()) is not None:
            self.hit(cap)
        elif self.disk is not None and self.disk.look():
            self.hit("disk")


def _disk_meter(command: Command, limits: SandboxLimits) -> DiskMeter | None:
    """The meter of the disk cap over every folder ``command`` may write (the workdir even
    when read-only: the floor confines no write); ``None`` without a cap."""
    if limits.disk_bytes is None:
        return None
    folders = [command.workdir, command.scratch, *command.writable]
    return DiskMeter(folders, limits.disk_bytes, stamp_in=command.scratch)


def _exit_watch(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits (Linux), else ``None``."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None  # the poll interval then bounds how late an exit is seen


def _read_into(pipe: Any, output: CappedOutput, stream: Stream) -> bool:
    """Move what ``pipe`` holds into ``output``'s ``stream``; ``False`` at its end."""
    try:
        chunk = os.read(pipe.fileno(), 65536)
    except BlockingIOError:
        return True
    except OSError:
        return False
    if not chunk:
        return False
    output.feed(stream, chunk)
    return True


def _start(spec: list[str], command: Command, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start the launcher in a new session."""
    return subprocess.Popen(
        [sys.executable, "-I", "-S", "-B", str(LAUNCHER), *spec],
        cwd=command.scratch,
        env=dict(env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


@dataclass(frozen=True, slots=True)
class _Status:
    exit_code: int | None
    signal: int | None

    @classmethod
    def of(cls, returncode: int, wrapping: Wrapping) -> _Status:
        if returncode < 0:
            return cls(None, -returncode)
        if wrapping.signal_in_status and returncode > 128:
            return cls(None, returncode - 128)
        return cls(returncode, None)


def _cap_after(killed_by: int | None, limits: SandboxLimits, cpu_spent_ns: int) -> Cap | None:
    """The cap that ended a command the supervisor did not kill itself."""
    if killed_by == signal.SIGXCPU:
        return "cpu"
    if killed_by == signal.SIGXFSZ:
        return "file_size"
    # The hard CPU rlimit (the cap + 1 s) kills with SIGKILL.
    if killed_by == signal.SIGKILL and cpu_spent_ns >= limits.cpu_seconds * 1e9:
        return "cpu"
    return None


def _kill_tree(pid: int, cgroups: CommandCgroups | None) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if cgroups is not None:
        cgroups.kill()
