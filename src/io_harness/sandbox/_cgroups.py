"""Cgroups for one command: memory, process-count and CPU caps, and a kill of the whole tree.

A group is made per command under the harness's own cgroup in each writable
hierarchy this machine mounts: cgroup v1 ``memory``, ``pids`` and
``cpuacct``, and cgroup v2 (whose ``cgroup.kill`` ends every process in the
group at once, setsid and double-fork escapers included). Where none is
writable, :meth:`CommandCgroups.create` returns ``None`` and the caller
falls back to rlimits and the process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from io_harness.sandbox._types import Cap, SandboxLimits

__all__ = ["CommandCgroups", "cgroups_report"]

_V2 = "unified"


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
                if option in ("memory", "pids", "cpuacct"):
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


def _parent_for(controller: str) -> Path | None:
    mount = _mounts().get(controller)
    if mount is None:
        return None
    own = mount / _own_paths().get(controller, "/").lstrip("/")
    for candidate in (own, mount):
        if candidate.is_dir() and os.access(candidate, os.W_OK):
            return candidate
    return None


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


@dataclass
class CommandCgroups:
    """The cgroups one command runs in; made, watched, killed and removed by the harness."""

    groups: dict[str, Path] = field(default_factory=dict)
    """Each group's folder, by controller (``unified`` for cgroup v2)."""
    cpu_limit_ns: int | None = None
    destroyed: bool = False

    @classmethod
    def create(cls, limits: SandboxLimits) -> CommandCgroups | None:
        """Groups with ``limits`` applied, or ``None`` when no hierarchy is writable here."""
        made = cls()
        name = f"ioh-{uuid.uuid4().hex[:12]}"
        for controller in ("memory", "pids", "cpuacct", _V2):
            parent = _parent_for(controller)
            if parent is None:
                continue
            folder = parent / name
            try:
                folder.mkdir()
            except OSError:
                continue
            made.groups[controller] = folder
        if not made.groups:
            return None
        made._apply(limits)
        return made

    def _apply(self, limits: SandboxLimits) -> None:
        memory = self.groups.get("memory")
        if memory is not None:
            _write(memory / "memory.limit_in_bytes", str(limits.memory_bytes))
            # Swap would let the tree grow past the cap instead of being killed.
            _write(memory / "memory.memsw.limit_in_bytes", str(limits.memory_bytes))
        pids = self.groups.get("pids")
        if pids is not None:
            _write(pids / "pids.max", str(limits.processes))
        unified = self.groups.get(_V2)
        if unified is not None:
            # Used where v2 has the controllers; a v1 group above already holds the cap.
            if memory is None:
                _write(unified / "memory.max", str(limits.memory_bytes))
                _write(unified / "memory.swap.max", "0")
            if pids is None:
                _write(unified / "pids.max", str(limits.processes))
        if "cpuacct" in self.groups or bool(unified and (unified / "cpu.stat").exists()):
            self.cpu_limit_ns = int(limits.cpu_seconds * 1e9)

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
        """The cap the tree has reached, if any."""
        memory, pids, unified = (self.groups.get(k) for k in ("memory", "pids", _V2))
        if memory is not None and _read_counter(memory / "memory.oom_control", "oom_kill"):
            return "memory"
        if unified is not None and _read_counter(unified / "memory.events", "oom_kill"):
            return "memory"
        for group in (pids, unified):
            if group is not None and _read_counter(group / "pids.events", "max"):
                return "processes"
        if self.cpu_limit_ns is not None and self.cpu_used_ns() > self.cpu_limit_ns:
            return "cpu"
        return None

    def cpu_used_ns(self) -> int:
        """CPU time the tree has used, in nanoseconds."""
        cpuacct = self.groups.get("cpuacct")
        if cpuacct is not None:
            with contextlib.suppress(OSError, ValueError):
                return int((cpuacct / "cpuacct.usage").read_text())
        unified = self.groups.get(_V2)
        if unified is not None:
            return _read_counter(unified / "cpu.stat", "usage_usec") * 1000
        return 0

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

    def destroy(self, patience: float = 5.0) -> bool:
        """Kill the tree, wait for it to be gone, remove the groups; whether all went."""
        deadline = time.monotonic() + patience
        while True:
            self.kill()
            if not self.pids() or time.monotonic() > deadline:
                break
            time.sleep(0.005)
        removed = True
        for folder in self.groups.values():
            while True:
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    # An exiting process keeps the group busy for a moment.
                    if time.monotonic() > deadline:
                        removed = False
                        break
                    time.sleep(0.005)
        self.destroyed = removed
        return removed


def cgroups_report() -> str:
    """Which hierarchies a command's groups would use on this machine, for ``ioh doctor``."""
    usable = [c for c in ("memory", "pids", "cpuacct", _V2) if _parent_for(c) is not None]
    if not usable:
        return "no writable cgroup hierarchy: caps fall back to rlimits"
    names = {_V2: "v2 (cgroup.kill)"}
    return "writable cgroups: " + ", ".join(names.get(c, f"v1 {c}") for c in usable)
