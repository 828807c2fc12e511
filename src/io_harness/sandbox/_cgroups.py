"""Cgroups for one command: memory, process-count and CPU caps, and a kill of the whole tree.

Each command runs in a set of groups under the harness's own cgroup, one in
each writable hierarchy this machine mounts: cgroup v1 ``memory``, ``pids``
and ``cpuacct``, and cgroup v2 (whose ``cgroup.kill`` ends every process in
the group at once, setsid and double-fork escapers included). Where none is
writable, :meth:`CommandCgroups.acquire` returns ``None`` and the caller falls
back to rlimits and the process group.

Making a group and first joining it costs the kernel tens of milliseconds,
so emptied sets are kept in a pool and reused; the counters a cap is read
from are compared with their values when the set was taken. Pooled sets are
removed when the harness exits; a set left by a harness that was killed is
removed by the next one (its name carries the dead pid).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from io_harness.sandbox._types import Cap, SandboxLimits

__all__ = ["CommandCgroups", "cgroups_report"]

_V2 = "unified"
_CONTROLLERS = ("memory", "pids", "cpuacct", _V2)
_PREFIX = "ioh-"


def _mounts() -> dict[str, Path]:
    """Each mounted hierarchy by controller (``unified`` for v2): its mount folder."""
    found: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split()
        if len(parts) < 4:
            continue
        if parts[2] == "cgroup2":
            found.setdefault(_V2, Path(parts[1]))
        elif parts[2] == "cgroup":
            for option in parts[3].split(","):
                if option in _CONTROLLERS:
                    found.setdefault(option, Path(parts[1]))
    return found


def _own_paths() -> dict[str, str]:
    """This process's cgroup path in each hierarchy, from ``/proc/self/cgroup``."""
    own: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return own
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            own[_V2] = path
        for controller in controllers.split(","):
            own[controller] = path
    return own


def _parents() -> dict[str, Path]:
    """Where this process may make groups, by controller."""
    mounts, own = _mounts(), _own_paths()
    parents = {}
    for controller, mount in mounts.items():
        mine = mount / own.get(controller, "/").lstrip("/")
        for candidate in (mine, mount):
            if candidate.is_dir() and os.access(candidate, os.W_OK):
                parents[controller] = candidate
                break
    return parents


def _read_counter(path: Path, key: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
    except OSError:
        return False
    return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class CommandCgroups:
    """The cgroups one command runs in; taken from the pool, watched, emptied and given back."""

    groups: dict[str, Path] = field(default_factory=dict)
    """Each group's folder, by controller (``unified`` for cgroup v2)."""
    cpu_limit_ns: int | None = None
    released: bool = False
    _baseline: dict[str, int] = field(default_factory=dict)
    _releasing: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def acquire(cls, limits: SandboxLimits, helpers: int = 0) -> CommandCgroups | None:
        """A set with ``limits`` applied, or ``None`` when no hierarchy is writable here.

        ``helpers`` is how many processes of the harness's own (wrappers, reapers)
        run in the groups beside the command; the process cap does not count them.
        """
        made = _POOL.take()
        if made is None:
            return None
        made.released = False
        made._apply(limits, helpers)
        made._baseline = made._counters()
        return made

    def _apply(self, limits: SandboxLimits, helpers: int) -> None:
        memory, pids, unified = (self.groups.get(k) for k in ("memory", "pids", _V2))
        if memory is not None:
            # Swap would let the tree grow past the cap instead of being killed; the
            # limit with swap may not be below the limit without, so order the writes.
            with_swap = memory / "memory.memsw.limit_in_bytes"
            _write(with_swap, "-1")
            if not _write(memory / "memory.limit_in_bytes", str(limits.memory_bytes)):
                # Page cache an earlier command left is charged here: uncharge it first.
                _write(memory / "memory.force_empty", "0")
                _write(memory / "memory.limit_in_bytes", str(limits.memory_bytes))
            _write(with_swap, str(limits.memory_bytes))
        # One more process than the cap: the launcher's guard lives in the groups too.
        if pids is not None:
            _write(pids / "pids.max", str(limits.processes + 1 + helpers))
        if unified is not None:
            # Used where v2 has the controllers; a v1 group above already holds the cap.
            if memory is None:
                _write(unified / "memory.max", str(limits.memory_bytes))
                _write(unified / "memory.swap.max", "0")
            if pids is None:
                _write(unified / "pids.max", str(limits.processes + 1 + helpers))
        has_cpu = "cpuacct" in self.groups or bool(unified and (unified / "cpu.stat").exists())
        # The tree is killed where RLIMIT_CPU's hard limit would kill one process (the cap
        # plus a second), so a lone process still sees its SIGXCPU at the cap first: the
        # tree's count also holds the launcher's own start-up, which the process's does not.
        tree_cap = limits.cpu_seconds + 1
        self.cpu_limit_ns = int(tree_cap * 1e9) if has_cpu else None

    def _counters(self) -> dict[str, int]:
        memory, pids, unified = (self.groups.get(k) for k in ("memory", "pids", _V2))
        counters = {"cpu": self._cpu_total_ns()}
        if memory is not None:
            counters["oom_v1"] = _read_counter(memory / "memory.oom_control", "oom_kill")
        if unified is not None:
            counters["oom_v2"] = _read_counter(unified / "memory.events", "oom_kill")
            counters["pids_v2"] = _read_counter(unified / "pids.events", "max")
        if pids is not None:
            counters["pids_v1"] = _read_counter(pids / "pids.events", "max")
        return counters

    def _grown(self, name: str, now: dict[str, int]) -> bool:
        return now.get(name, 0) > self._baseline.get(name, 0)

    @property
    def paths(self) -> list[str]:
        """The folders a command joins (the launcher writes its pid into each)."""
        return [str(folder) for folder in self.groups.values()]

    @property
    def caps_memory(self) -> bool:
        """Whether memory is capped for the whole tree (else by address space per process)."""
        unified = self.groups.get(_V2)
        return "memory" in self.groups or bool(unified and (unified / "memory.max").exists())

    @property
    def caps_processes(self) -> bool:
        """Whether the process count is capped for the whole tree."""
        unified = self.groups.get(_V2)
        return "pids" in self.groups or bool(unified and (unified / "pids.max").exists())

    def cap_hit(self) -> Cap | None:
        """The cap the tree has reached since the set was taken, if any."""
        now = self._counters()
        if self._grown("oom_v1", now) or self._grown("oom_v2", now):
            return "memory"
        if self._grown("pids_v1", now) or self._grown("pids_v2", now):
            return "processes"
        if self.cpu_limit_ns is not None and self.cpu_used_ns() > self.cpu_limit_ns:
            return "cpu"
        return None

    def _cpu_total_ns(self) -> int:
        cpuacct = self.groups.get("cpuacct")
        if cpuacct is not None:
            with contextlib.suppress(OSError, ValueError):
                return int((cpuacct / "cpuacct.usage").read_text())
        unified = self.groups.get(_V2)
        if unified is not None:
            return _read_counter(unified / "cpu.stat", "usage_usec") * 1000
        return 0

    def cpu_used_ns(self) -> int:
        """CPU time the tree has used since the set was taken, in nanoseconds."""
        return self._cpu_total_ns() - self._baseline.get("cpu", 0)

    def pids(self) -> set[int]:
        """Every process still in the groups."""
        found: set[int] = set()
        for folder in self.groups.values():
            with contextlib.suppress(OSError, ValueError):
                found.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
        return found

    def kill(self) -> None:
        """Kill every process in the groups, including ones that left their session."""
        unified = self.groups.get(_V2)
        if unified is not None and _write(unified / "cgroup.kill", "1"):
            return
        # cgroup v1 has no kill file: kill what is listed until nothing is (forks race us).
        for _ in range(100):
            alive = self.pids()
            if not alive:
                return
            for pid in alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    def release(self, patience: float = 5.0) -> bool:
        """Kill the tree and wait until it is gone; whether it went (the set is then reused).

        Safe to call from two threads (a cancelled run and its supervisor): the set
        goes back to the pool once.
        """
        with self._releasing:
            return self._release(patience)

    def _release(self, patience: float) -> bool:
        if self.released:
            return True
        deadline = time.monotonic() + patience
        while True:
            self.kill()
            if not self.pids():
                break
            if time.monotonic() > deadline:
                _POOL.discard(self)
                return False
            time.sleep(0.002)
        self.released = True
        # A killed process leaves the group's list at once but counts against the
        # process cap until it is reaped; a set still counting one is not reused.
        # (It stays in the pool's list, to be removed when the harness exits.)
        if not self._still_counted():
            _POOL.give_back(self)
        return True

    def _still_counted(self) -> bool:
        for controller in ("pids", _V2):
            group = self.groups.get(controller)
            counter = group / "pids.current" if group is not None else None
            if counter is not None and counter.exists():
                with contextlib.suppress(OSError, ValueError):
                    if int(counter.read_text()) > 0:
                        return True
        return False

    def remove(self) -> None:
        """Remove the groups' folders (the pool does this at exit)."""
        for folder in self.groups.values():
            with contextlib.suppress(OSError):
                folder.rmdir()


class _Pool:
    """Emptied group sets, ready to be taken again; removed when the harness exits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[CommandCgroups] = []
        self._all: list[CommandCgroups] = []
        self._numbers = itertools.count()
        self._parents: dict[str, Path] | None = None

    def take(self) -> CommandCgroups | None:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            if self._parents is None:
                self._parents = _parents()
                _sweep(self._parents)
                atexit.register(self.remove_all)
            parents = self._parents
            name = f"{_PREFIX}{os.getpid()}-{next(self._numbers)}"
        made = CommandCgroups()
        for controller, parent in parents.items():
            with contextlib.suppress(OSError):
                (parent / name).mkdir()
                made.groups[controller] = parent / name
        if not made.groups:
            return None
        with self._lock:
            self._all.append(made)
        return made

    def give_back(self, groups: CommandCgroups) -> None:
        with self._lock:
            self._idle.append(groups)

    def discard(self, groups: CommandCgroups) -> None:
        with self._lock:
            if groups in self._all:
                self._all.remove(groups)

    def remove_all(self) -> None:
        with self._lock:
            for groups in self._all:
                groups.kill()
                groups.remove()
            self._all.clear()
            self._idle.clear()


def _sweep(parents: dict[str, Path]) -> None:
    """Remove the groups a harness process, now gone, left behind, and what still runs in them."""
    for controller, parent in parents.items():
        with contextlib.suppress(OSError):
            for folder in parent.iterdir():
                owner = folder.name.removeprefix(_PREFIX).split("-", 1)[0]
                ours = folder.name.startswith(_PREFIX) and owner.isdigit()
                if ours and not _pid_alive(int(owner)):
                    left = CommandCgroups(groups={controller: folder})
                    left.kill()
                    deadline = time.monotonic() + 1.0
                    while left.pids() and time.monotonic() < deadline:
                        time.sleep(0.002)
                    left.remove()


_POOL = _Pool()


def cgroups_report() -> str:
    """Which hierarchies a command's groups would use on this machine, for ``ioh doctor``."""
    usable = [c for c in _CONTROLLERS if c in _parents()]
    if not usable:
        return "no writable cgroup hierarchy: caps fall back to rlimits"
    names = {_V2: "v2 (cgroup.kill)"}
    return "writable cgroups: " + ", ".join(names.get(c, f"v1 {c}") for c in usable)
