"""Choosing a backend: walk this platform's chain, take the first that gives what is asked.

What :func:`select` passed by, and why, stays on the chosen sandbox
(``selection``) so the trace and ``ioh doctor`` can say it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from io_harness.errors import SandboxError
from io_harness.sandbox._types import Sandbox, SandboxConfig

__all__ = ["BackendReport", "probe", "select"]


@dataclass(frozen=True, slots=True)
class BackendReport:
    """What one backend can do on this machine, for ``ioh doctor`` and the trace."""

    name: str
    available: bool
    reason: str
    denies_network: bool
    disk_cap: str = ""
    """How the backend holds the disk cap (``SandboxLimits.disk_bytes``)."""


def _classes() -> dict[str, Any]:
    from io_harness.sandbox._jobobject import JobObjectSandbox
    from io_harness.sandbox._linux import (
        BubblewrapSandbox,
        FloorSandbox,
        LandlockSandbox,
        NamespacesSandbox,
    )
    from io_harness.sandbox._seatbelt import SeatbeltSandbox

    return {
        "bubblewrap": BubblewrapSandbox,
        "landlock": LandlockSandbox,
        "namespaces": NamespacesSandbox,
        "seatbelt": SeatbeltSandbox,
        "job_object": JobObjectSandbox,
        "floor": FloorSandbox,
    }


def _chain() -> tuple[str, ...]:
    if sys.platform == "linux":
        return ("bubblewrap", "landlock", "namespaces", "floor")
    if sys.platform == "darwin":
        return ("seatbelt", "floor")
    if sys.platform == "win32":
        return ("job_object",)
    return ("floor",)


def probe() -> list[BackendReport]:
    """Every backend, and whether this machine offers it."""
    reports = []
    for name, cls in _classes().items():
        available: Callable[[], tuple[bool, str]] = cls.available
        ok, reason = available()
        reports.append(BackendReport(name, ok, reason, bool(cls.denies_network), str(cls.disk_cap)))
    return reports


def select(config: SandboxConfig | None = None) -> Sandbox:
    """The first backend of this platform's chain (or ``config.backends``) that gives ``config``.

    Raises :class:`SandboxError` naming each backend passed by and why, when none
    does. A backend that cannot deny the network is taken for a config that
    denies it only with ``accept_floor=True``.
    """
    config = config or SandboxConfig()
    classes = _classes()
    passed: list[str] = []
    for name in config.backends or _chain():
        cls = classes[name]
        ok, reason = cls.available()
        if not ok:
            passed.append(f"{name}: {reason}")
        elif name == "landlock" and os.geteuid() == 0 and config.backends is None:
            passed.append("landlock: relied on only with a non-root uid")
        elif config.network != "open" and not cls.denies_network and not config.accept_floor:
            passed.append(
                f"{name}: cannot deny the network (SandboxConfig(accept_floor=True) "
                "runs on it anyway)"
            )
        else:
            chosen = cls(config)
            chosen.selection = tuple(passed)
            sandbox: Sandbox = chosen
            return sandbox
    raise SandboxError("no sandbox backend gives this configuration: " + "; ".join(passed))
