"""The POSIX backends: the portable floor, and bubblewrap, Landlock and namespaces on Linux.

Each says only how it wraps a command; :mod:`._spawn` does the rest. Every
Linux backend loads the same seccomp filter. Each has ``available()``,
which says whether this machine offers it and, if not, why.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from io_harness.sandbox._command import LAUNCHER, Command, Wrapping, confine_code
from io_harness.sandbox._disk import PrivateTmpfs
from io_harness.sandbox._launch import launch_args
from io_harness.sandbox._spawn import ContainedSandbox

__all__ = ["BubblewrapSandbox", "FloorSandbox", "LandlockSandbox", "NamespacesSandbox"]

NOBODY = 65534
"""The uid and gid a command runs as when the harness runs as root (bubblewrap runs as it
too, but with ``full_access``; see :func:`_as_nobody`)."""

SECCOMP_FD = 3
"""The descriptor bubblewrap reads the seccomp filter from (the launcher opens it there)."""

_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts")
"""Devices every command may write (Landlock counts opening them for writing)."""


def _as_root() -> bool:
    return os.geteuid() == 0


def _works(argv: list[str]) -> tuple[bool, str]:
    """Whether a trial command succeeds here; if not, what it said."""
    try:
        done = subprocess.run(argv, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    said = done.stderr.decode(errors="replace").strip().splitlines()
    return done.returncode == 0, (said[-1] if said else f"exit status {done.returncode}")


@functools.cache
def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers (0: none)."""
    if sys.platform != "linux":
        return 0
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(.., VERSION)
    return max(int(version), 0)


def _seccomp_ok() -> tuple[bool, str]:
    from io_harness.sandbox._seccomp import seccomp_available

    return seccomp_available()


class FloorSandbox(ContainedSandbox):
    """Everywhere: a private scratch folder, rlimits, a new session, wall and output caps.

    On Linux it also uses writable cgroups for memory, process count and the
    kill of the whole tree. It cannot deny the network or confine writes.
    """

    backend_name = "floor"
    disk_cap = (
        "metered: workdir, scratch, writable folders (writes elsewhere are not); killed past it"
    )

    @staticmethod
    def available() -> tuple[bool, str]:
        """The floor runs on every POSIX system."""
        if os.name != "posix":
            return False, "the floor's launcher needs a POSIX system"
        return True, "always available; cannot deny the network or confine writes"

    def wrap(self, command: Command) -> Wrapping:
        """Run the command itself: the launcher's rlimits and cgroups are the containment."""
        return Wrapping(argv=command.argv)


class BubblewrapSandbox(ContainedSandbox):
    """Linux: bubblewrap namespaces, a read-only root, dropped capabilities and seccomp."""

    backend_name = "bubblewrap"
    needs_seccomp = True
    denies_network = True
    hides_paths = True
    helper_processes = 2  # bwrap outside, and its init in the new pid namespace
    disk_cap = (
        "metered: workdir, scratch, writable folders, /tmp (a tmpfs of its size); killed past it"
    )

    @staticmethod
    @functools.cache
    def available() -> tuple[bool, str]:
        """Whether ``bwrap`` is installed and can make a user namespace here."""
        if sys.platform != "linux":
            return False, "bubblewrap runs only on Linux"
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            return False, "bwrap not found (Debian package bubblewrap)"
        ok, said = _works([bwrap, "--unshare-all", "--ro-bind", "/", "/", "--", "true"])
        if not ok:
            return False, f"bwrap cannot make namespaces here: {said}"
        ok, said = _seccomp_ok()
        return (True, bwrap) if ok else (False, said)

    def wrap(self, command: Command) -> Wrapping:
        """``bwrap`` with every namespace, the root read-only and the workdir bound."""
        assert command.seccomp is not None
        args = ["bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        args += ["--unshare-cgroup-try"]
        launcher: dict[str, Any] = {"fds": {SECCOMP_FD: str(command.seccomp)}}
        as_nobody = _as_root() and command.mode != "full_access"
        if _as_root() and command.mode == "full_access":
            # Writing the whole host was asked for: bwrap runs as root, and the command's
            # uid (non-root inside, so it has no capabilities) is the host's root.
            args += ["--uid", str(NOBODY), "--gid", str(NOBODY)]
        elif as_nobody:
            launcher |= _as_nobody(command, masks_sockets=True)
        if command.config.network != "open":
            args.append("--unshare-net")
        args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        root = "--bind" if command.mode == "full_access" else "--ro-bind"
        tmp = _private_tmp(command)
        args += [root, "/", "/", "--dev", "/dev", "--proc", "/proc", *_tmpfs_args(tmp)]
        # As root the command's uid maps to the host's root: only a read-only mount keeps
        # it from the kernel's global settings (core_pattern runs a program as root).
        args += ["--ro-bind", "/proc/sys", "/proc/sys"]
        if command.config.network != "open":
            # Host daemons listen on Unix sockets under /run (/var/run links there).
            args += ["--tmpfs", "/run"]
        for path in (*_hidden_by_private_folders(command), *command.readable):
            args += ["--ro-bind", str(path), str(path)]
        workdir = "--ro-bind" if command.mode == "read_only" else "--bind"
        args += [workdir, str(command.workdir), str(command.workdir)]
        for socket in host_unix_sockets(command):
            args += ["--ro-bind", "/dev/null", str(socket)]  # connect() there now fails
        for path in (*command.writable, command.scratch):
            args += ["--bind", str(path), str(path)]
        # Over the writable folders: what runs code later, read-only (a mount point cannot
        # be moved or removed either), and the harness's own files, covered.
        for path in command.shield.kept:
            args += ["--ro-bind", str(path), str(path)]
        # As nobody, the launcher has covered them already, in the namespace bwrap starts
        # from (bwrap, nobody by then, could not reach a store in a folder only root enters).
        for path in () if as_nobody else command.shield.hidden:
            args += (
                ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
            )
        args += ["--seccomp", str(SECCOMP_FD), "--chdir", str(command.cwd), "--"]
        bwrap = shutil.which("bwrap") or "/usr/bin/bwrap"
        return Wrapping(
            argv=(bwrap, *args[1:], *command.argv),
            launcher=launcher,
            signal_in_status=True,
            dies_with_harness=True,
            private_tmpfs=tmp,
        )


@functools.cache
def _bwrap_sizes_tmpfs() -> bool:
    """Whether this bwrap takes ``--size`` for a tmpfs (bubblewrap 0.5 and later)."""
    try:
        bwrap = shutil.which("bwrap") or "/usr/bin/bwrap"
        said = subprocess.run([bwrap, "--help"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return b"--size" in said.stdout + said.stderr


def _private_tmp(command: Command) -> PrivateTmpfs | None:
    """The tmpfs bubblewrap mounts at ``/tmp`` for a disk cap: one page over the cap, so
    that a command which fills it is past the cap. ``None`` without a cap or ``--size``."""
    cap = command.limits.disk_bytes
    if cap is None or not _bwrap_sizes_tmpfs():
        return None
    return PrivateTmpfs("/tmp", cap + os.sysconf("SC_PAGE_SIZE"))


def _tmpfs_args(tmp: PrivateTmpfs | None) -> list[str]:
    sized = ["--size", str(tmp.size_bytes)] if tmp is not None else []
    return [*sized, "--tmpfs", "/tmp"]


def _as_nobody(command: Command, *programs: str, masks_sockets: bool = False) -> dict[str, Any]:
    """The launcher's steps that run the command (and a wrapper: bubblewrap, ``unshare``)
    as ``nobody``; ``programs`` are more the command must reach (a wrapper's Python).

    A harness running as root must not run commands as the host's root (a uid
    mapped to 0 is root to anything outside that checks only the uid). The
    launcher, still root, idmaps each folder the command may write (and each Unix
    socket the configuration allows), so ``nobody`` writes there and the files stay
    their owner's, and mounts back the folders it must reach through one only root
    may enter (a program under ``/root``), hiding the rest of that one; a wrapper
    that ``masks_sockets`` itself (bubblewrap) is spared the launcher's masking of
    the host's listening sockets. Then it becomes ``nobody`` and executes the rest.
    The same namespace covers the harness's own files (``mask``) and binds each entry
    that runs code later read-only (``keep``).
    """
    path = os.environ.get("PATH", os.defpath).split(os.pathsep)
    need = [command.workdir, command.cwd, *command.readable, *(Path(p) for p in path if p)]
    need += [Path(p) for p in (command.argv[0], *programs) if os.path.isabs(p)]
    need += _interpreter()
    # A socket the configuration allows is lent too: connecting to one takes write access.
    sockets = [Path(p) for p in command.config.allow_unix_sockets if Path(p).exists()]
    lend = [*command.writable_paths(), *sockets]
    masked = [] if masks_sockets else host_unix_sockets(command, private=())
    # The launcher covers the harness's own files and binds what runs code later read-only
    # in its mount namespace, which every wrapper's (bubblewrap's, unshare's) starts from.
    masked += command.shield.hidden
    kept = command.shield.kept
    return {
        "uid": NOBODY,
        "gid": NOBODY,
        "mask": [str(p) for p in masked],
        "keep": [str(p) for p in kept],
        "lend": [str(p) for p in lend],
        "need": sorted({str(p) for p in need if p.exists()} - {str(p) for p in lend}),
    }


def _interpreter() -> set[Path]:
    """Where the harness's Python and this package live: a command may run that Python
    (a virtualenv under a folder only its owner enters, the installation it was made
    from), and a wrapper runs the launcher from the package (a checkout on the path)."""
    found = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), _PACKAGE}
    return found | {Path(os.path.realpath(sys.executable)).parent.parent}


_PACKAGE = Path(__file__).resolve().parent.parent


_PRIVATE = (Path("/tmp"), Path("/run"))
"""Folders bubblewrap replaces with empty ones of the sandbox's own."""


def _hidden_by_private_folders(command: Command) -> list[Path]:
    """What the command needs that lives in a folder bubblewrap makes private.

    The program (by its name and where a link leads) and the Python the harness runs
    (a virtualenv in a clone under ``/tmp``, say) are bound back, read-only, at the
    same paths.
    """
    program = Path(command.argv[0])
    needed = {program.parent, Path(os.path.realpath(program)).parent, *_interpreter()}
    return sorted(
        path
        for path in needed
        if any(path.is_relative_to(folder) and path != folder for folder in _PRIVATE)
        and path.exists()
    )


def host_unix_sockets(command: Command, private: tuple[Path, ...] = _PRIVATE) -> list[Path]:
    """The host's listening Unix sockets a command must not reach: every one in
    ``/proc/net/unix`` but those under a ``private`` folder (hidden already: bubblewrap
    gives a command its own), under the command's own folders, or allowed by the
    configuration; none with an open network."""
    if command.config.network == "open":
        return []
    try:
        table = Path("/proc/net/unix").read_text().splitlines()[1:]
    except OSError:
        return []
    own = (command.workdir, command.scratch, *command.writable, *command.readable)
    allowed = {Path(p) for p in command.config.allow_unix_sockets}
    found: set[Path] = set()
    for line in table:
        fields = line.split(None, 7)
        # Num RefCount Protocol Flags Type St Inode Path; flag 0x10000: listening.
        if len(fields) < 8 or not int(fields[3], 16) & 0x10000 or not fields[7].startswith("/"):
            continue
        path = Path(fields[7])
        if (
            path in allowed
            or any(path.is_relative_to(folder) for folder in (*private, *own))
            or not path.exists()
        ):
            continue
        found.add(path)
    return sorted(found)


def _confining_steps(command: Command) -> dict[str, Any]:
    """The launcher's Landlock and seccomp steps for ``command``."""
    steps: dict[str, Any] = {"seccomp": str(command.seccomp)}
    if command.mode != "full_access":
        steps["landlock"] = [str(p) for p in command.writable_paths()] + list(_DEVICES)
    return steps


class LandlockSandbox(ContainedSandbox):
    """Linux without bwrap: Landlock confines writes, seccomp the network; no namespaces.

    Relied on only with a non-root uid. As root the launcher lends the command's
    folders to ``nobody`` and becomes it (:func:`_as_nobody`); :func:`select` still
    passes this backend by when the harness runs as root.
    """

    backend_name = "landlock"
    needs_seccomp = True
    denies_network = True
    # As root the launcher forks once, briefly, for the user namespace of its idmaps.
    helper_processes = 1 if _as_root() else 0
    # As root the launcher's own mount namespace covers and binds (see _as_nobody).
    hides_paths = _as_root()

    @staticmethod
    def available() -> tuple[bool, str]:
        """Whether this kernel offers Landlock and libseccomp is found."""
        abi = landlock_abi()
        if abi < 1:
            return False, "this kernel offers no Landlock"
        ok, said = _seccomp_ok()
        return (True, f"Landlock ABI {abi}") if ok else (False, said)

    def wrap(self, command: Command) -> Wrapping:
        """The command itself, after the launcher's Landlock and seccomp steps."""
        steps = _confining_steps(command)
        if _as_root():
            steps |= _as_nobody(command)
        return Wrapping(argv=command.argv, launcher=steps)


class NamespacesSandbox(ContainedSandbox):
    """Linux without bwrap: ``unshare`` namespaces, with Landlock and seccomp inside."""

    backend_name = "namespaces"
    needs_seccomp = True
    denies_network = True
    helper_processes = 2  # unshare, and the launcher staying as the namespace's init
    hides_paths = _as_root()  # the outer launcher's mount namespace, as for Landlock

    @staticmethod
    @functools.cache
    def available() -> tuple[bool, str]:
        """Whether ``unshare`` can make a user namespace here and Landlock confines writes."""
        if sys.platform != "linux":
            return False, "namespaces are Linux's"
        unshare = shutil.which("unshare")
        if unshare is None:
            return False, "unshare not found (util-linux)"
        if landlock_abi() < 1:
            return False, "without Landlock, namespaces alone do not confine writes"
        ok, said = _works([unshare, "--user", "--pid", "--fork", "--net", "true"])
        if not ok:
            return False, f"unshare cannot make namespaces here: {said}"
        ok, said = _seccomp_ok()
        return (True, unshare) if ok else (False, said)

    def wrap(self, command: Command) -> Wrapping:
        """``unshare`` into new namespaces, then the launcher again to confine and exec."""
        inner = launch_args(
            command.argv,
            cwd=str(command.cwd),
            code=confine_code(command),
            **_confining_steps(command),
        )
        # As root, the outer launcher becomes nobody first (see _as_nobody), so the
        # namespace's user is nobody on the host too.
        args = ["--user", "-c", "--pid", "--fork", "--kill-child", "--mount-proc"]
        args += ["--ipc", "--uts"]
        if command.config.network != "open":
            args.append("--net")
        launcher = [sys.executable, "-I", "-S", "-B", str(LAUNCHER), *inner]
        unshare = shutil.which("unshare") or "/usr/bin/unshare"
        return Wrapping(
            argv=(unshare, *args, "--", *launcher),
            launcher=_as_nobody(command, sys.executable) if _as_root() else {},
            signal_in_status=True,
        )
