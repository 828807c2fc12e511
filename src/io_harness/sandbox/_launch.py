"""The launcher: the first program of every sandboxed command on POSIX.

Run as ``python -I -S -B _launch.py OPTIONS -- ARGV`` (:func:`launch_args`
writes the options). In order it joins the command's cgroups, sets its
rlimits, leaves a guard behind (with ``--parent``: a process that kills the
command's cgroups and process group if the harness dies first), drops to
another uid, applies Landlock and seccomp (through
``_confine.py``, loaded only then), changes folder, opens the files the
program is to find at given descriptors, restores the signals Python ignores
and executes ARGV. It is a script of the standard library
alone, run by path, so nothing of the workspace can stand in for it; its
options are plain arguments because a parser module would cost more to
import than the rest of the launch.

Any failure before the exec exits with status 125 and a line on stderr that
begins with ``ioh-launch:``, so the harness can tell a sandbox that could not
be set up from a command that failed.
"""

# Only modules Python has loaded by the time it runs a script, and two small C
# modules: typing, contextlib or signal (which loads enum) would each cost more to
# import than the rest of the launch. Hence try/except where a suppress() would do.
from __future__ import annotations

import _signal as signal  # type: ignore[import-not-found]  # signal without enum
import os
import sys
import types

try:
    import resource
except ImportError:  # Windows, where the harness imports launch_args but never launches
    resource = None  # type: ignore[assignment]

LAUNCH_FAILED = 125
MARK = "ioh-launch:"


def launch_args(
    argv: list[str] | tuple[str, ...],
    *,
    cgroups: list[str] | None = None,
    rlimits: dict[str, list[int]] | None = None,
    uid: int | None = None,
    gid: int | None = None,
    landlock: list[str] | None = None,
    seccomp: str | None = None,
    cwd: str | None = None,
    parent: int | None = None,
    scratch: str | None = None,
    fds: dict[int, str] | None = None,
    lend: list[str] | None = None,
    need: list[str] | None = None,
    mask: list[str] | None = None,
    keep: list[str] | None = None,
    code: str | None = None,
) -> list[str]:
    """The launcher's arguments: join ``cgroups``, set ``rlimits``, become ``uid``/``gid``,
    allow writes only beneath ``landlock`` (when given), load ``seccomp``, enter ``cwd``,
    open each file of ``fds`` read-only at its descriptor, then execute ``argv`` (its
    program an absolute path). Before becoming ``uid``, as root, it lends that uid the
    paths of ``lend`` to write, makes those of ``need`` reachable, covers those of
    ``mask`` and binds those of ``keep`` read-only (``lend_to`` in ``_confine.py``,
    loaded from ``code`` when given: its compiled code, marshalled). With ``parent``
    (the harness's pid), a guard outlives the exec and ends the command's tree, and
    removes ``scratch``, if ``parent`` dies.

    The files are opened by the launcher, not passed in, so the whole line is a
    plain command any spawner can start (the MCP SDK's, for a sandboxed server)."""
    return [
        *_guard_and_limit_args(parent, scratch, cgroups or [], rlimits or {}),
        *_lend_args(uid, gid, lend or [], need or [], mask or [], keep or [], code),
        *_confine_args(landlock, seccomp, cwd, fds or {}),
        "--",
        *argv,
    ]


def _guard_and_limit_args(
    parent: int | None, scratch: str | None, cgroups: list[str], rlimits: dict[str, list[int]]
) -> list[str]:
    """The options of what is done first: the guard's (``--parent``, ``--scratch``), the
    cgroups joined, the rlimits set."""
    args: list[str] = []
    if parent is not None:
        args += ["--parent", str(parent)]
    if scratch is not None:
        args += ["--scratch", scratch]
    for path in cgroups:
        args += ["--cgroup", path]
    for name, (soft, hard) in rlimits.items():
        args += ["--rlimit", name, str(soft), str(hard)]
    return args


def _lend_args(
    uid: int | None,
    gid: int | None,
    lend: list[str],
    need: list[str],
    mask: list[str],
    keep: list[str],
    code: str | None,
) -> list[str]:
    """The options of becoming another uid, and of what root lends it before (``lend_to``,
    loaded from ``code``)."""
    args: list[str] = []
    if uid is not None and gid is not None:
        args += ["--uid", str(uid), "--gid", str(gid)]
    for option, paths in (("--lend", lend), ("--need", need), ("--mask", mask), ("--keep", keep)):
        for path in paths:
            args += [option, path]
    if code is not None:
        args += ["--code", code]
    return args


def _confine_args(
    landlock: list[str] | None, seccomp: str | None, cwd: str | None, fds: dict[int, str]
) -> list[str]:
    """The options of the last steps: Landlock's writable paths, the seccomp filter, the
    folder to enter, the files opened at given descriptors."""
    args: list[str] = []
    if landlock is not None:
        args.append("--landlock")
        for path in landlock:
            args += ["--writable", path]
    if seccomp is not None:
        args += ["--seccomp", seccomp]
    if cwd is not None:
        args += ["--cwd", cwd]
    for number, path in fds.items():
        args += ["--fd", str(number), path]
    return args


def _fail(message: str) -> None:
    sys.stderr.write(f"{MARK} {message}\n")
    sys.stderr.flush()
    os._exit(LAUNCH_FAILED)


def _load_confine(code: str | None) -> types.ModuleType:
    """``_confine.py`` beside this file: from ``code`` (its compiled code, marshalled by the
    harness) when given, else loaded by path (this script is not run as a package).

    Compiling it costs more than the rest of the launch, and Python may not cache it
    (``PYTHONDONTWRITEBYTECODE``, a read-only install): the harness compiles it once.
    """
    if code is not None:
        import marshal

        module = types.ModuleType("ioh_confine")
        with open(code, "rb") as handle:
            exec(marshal.loads(handle.read()), module.__dict__)
        return module
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_confine.py")
    spec = importlib.util.spec_from_file_location("ioh_confine", path)
    if spec is None or spec.loader is None:
        _fail(f"cannot load {path}")
        raise SystemExit(LAUNCH_FAILED)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _end_everything(cgroups: list[str], scratch: str | None) -> None:
    """Kill every process in ``cgroups``, remove ``scratch``, then end this process group,
    the guard last."""
    me = os.getpid()
    for path in cgroups:  # v1 has no kill file: kill what is listed until nothing is
        for _ in range(100):
            try:
                with open(os.path.join(path, "cgroup.procs")) as handle:
                    alive = [int(p) for p in handle.read().split() if int(p) != me]
            except (OSError, ValueError):
                break
            if not alive:
                break
            for pid in alive:
                try:  # noqa: SIM105 - see the imports
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
    if scratch is not None:
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)
    for path in cgroups:
        try:
            with open(os.path.join(path, "cgroup.kill"), "w") as kill:
                kill.write("1")
        except OSError:
            pass
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    finally:
        os._exit(LAUNCH_FAILED)


def _guard(parent: int, cgroups: list[str], scratch: str | None) -> None:
    """Fork: the child goes on to become the command; this process stays as its guard.

    The guard waits for the command and ends with its status (a signal is raised
    again), so the harness sees it as the command. If the harness (``parent``)
    dies first -- killed, say, so that it could not tear the command down -- the
    guard kills the whole tree: nothing a command started outlives the harness.
    """
    import select

    try:
        watch_parent = os.pidfd_open(parent)
    except ProcessLookupError:
        _end_everything(cgroups, scratch)
    except OSError:  # a kernel without pidfds (before 5.3): run unguarded
        return
    if os.getppid() != parent:  # the harness died before the guard could watch it
        _end_everything(cgroups, scratch)
    try:
        child = os.fork()
    except OSError:  # a process cap too tight for two: run unguarded, as before guards
        os.close(watch_parent)
        return
    if child == 0:
        os.close(watch_parent)
        return
    watch_child = os.pidfd_open(child)
    poll = select.poll()
    poll.register(watch_parent, select.POLLIN)
    poll.register(watch_child, select.POLLIN)
    while True:
        ready = {fd for fd, _ in poll.poll()}
        if watch_parent in ready:
            _end_everything(cgroups, scratch)
        if watch_child in ready:
            break
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        os.kill(os.getpid(), number)
        os._exit(128 + number)
    os._exit(os.WEXITSTATUS(status))


def _stay_as_init() -> None:
    """In a new pid namespace, run the command as a child and reap until it ends.

    The kernel drops default-action signals sent to a namespace's init, so a
    command running as pid 1 would outlive SIGXFSZ. The exit status carries a
    signal as 128 + N, as bubblewrap's does.
    """
    child = os.fork()
    if child == 0:
        return
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(LAUNCH_FAILED)
        if pid == child:
            if os.WIFSIGNALED(status):
                os._exit(128 + os.WTERMSIG(status))
            os._exit(os.WEXITSTATUS(status))


class _Steps:
    """What the options ask for, read before anything is done."""

    def __init__(self, args: list[str]) -> None:
        self.cgroups: list[str] = []
        self.rlimits: list[tuple[int, int, int]] = []
        self.uid: int | None = None
        self.gid: int | None = None
        self.writable: list[str] | None = None
        self.seccomp: str | None = None
        self.cwd: str | None = None
        self.parent: int | None = None
        self.scratch: str | None = None
        self.fds: list[tuple[int, str]] = []
        self.lend: list[str] = []
        self.need: list[str] = []
        self.mask: list[str] = []
        self.keep: list[str] = []
        self.code: str | None = None
        while args and args[0] != "--":
            option, args = args[0], args[1:]
            if option == "--rlimit":
                kind = getattr(resource, args[0])
                self.rlimits.append((kind, int(args[1]), int(args[2])))
                args = args[3:]
            elif option == "--fd":
                self.fds.append((int(args[0]), args[1]))
                args = args[2:]
            elif option == "--landlock":
                self.writable = self.writable or []
            else:
                self._take(option, args[0])
                args = args[1:]
        self.argv = args[1:]

    def _take(self, option: str, value: str) -> None:
        if option == "--cgroup":
            self.cgroups.append(value)
        elif option == "--uid":
            self.uid = int(value)
        elif option == "--gid":
            self.gid = int(value)
        elif option == "--writable":
            self.writable = [*(self.writable or []), value]
        elif option == "--seccomp":
            self.seccomp = value
        elif option == "--cwd":
            self.cwd = value
        elif option == "--parent":
            self.parent = int(value)
        elif option == "--scratch":
            self.scratch = value
        elif option == "--lend":
            self.lend.append(value)
        elif option == "--need":
            self.need.append(value)
        elif option == "--mask":
            self.mask.append(value)
        elif option == "--keep":
            self.keep.append(value)
        elif option == "--code":
            self.code = value
        else:
            raise ValueError(f"unknown option {option}")

    def apply(self) -> None:
        for path in self.cgroups:
            with open(os.path.join(path, "cgroup.procs"), "w") as handle:
                handle.write(str(os.getpid()))
        for kind, soft, hard in self.rlimits:
            resource.setrlimit(kind, (soft, hard))
        if self.parent is not None:
            _guard(self.parent, self.cgroups, self.scratch)
        # Loaded before the uid changes: another uid may not read this Python's files.
        lending = bool(self.lend or self.need) and self.uid is not None and self.gid is not None
        confining = self.writable is not None or self.seccomp is not None
        module = _load_confine(self.code) if confining or lending else None
        if module is not None and lending:
            try:
                module.lend_to(self.uid, self.gid, self.lend, self.need, self.mask, self.keep)
            except module.ConfineError as exc:
                _fail(str(exc))
        # Opened before the uid changes too: the files may be root's alone.
        for number, path in self.fds:
            opened = os.open(path, os.O_RDONLY)
            if opened != number:  # nothing of the launcher's own is at ``number`` by now
                os.dup2(opened, number)
                os.close(opened)
            os.set_inheritable(number, True)
        if self.uid is not None and self.gid is not None:
            os.setgroups([])
            os.setgid(self.gid)
            os.setuid(self.uid)
        if module is not None:
            try:
                module.confine(self.writable, self.seccomp)
            except module.ConfineError as exc:
                _fail(str(exc))
        if self.cwd is not None:
            os.chdir(self.cwd)


def main(args: list[str]) -> None:
    """Set up as ``args`` say, then become the command."""
    try:
        steps = _Steps(args)
        steps.apply()
    except (OSError, ValueError, IndexError, AttributeError) as exc:
        _fail(f"setting up the sandbox failed: {exc}")
        return
    if not steps.argv:
        _fail("no command to run")
    # Python ignores these two, and a wrapper may block signals: both survive exec.
    for name in ("SIGPIPE", "SIGXFSZ"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    if os.getpid() == 1:
        _stay_as_init()
    try:
        os.execv(steps.argv[0], steps.argv)
    except OSError as exc:
        _fail(f"cannot execute {steps.argv[0]}: {exc.strerror or exc}")


if __name__ == "__main__":
    main(sys.argv[1:])
