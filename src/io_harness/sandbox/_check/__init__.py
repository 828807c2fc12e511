"""The sandbox check: every promise of the :class:`~io_harness.sandbox.Sandbox` protocol,
tried with real commands against a sandbox, one case at a time.

Shipped as :func:`io_harness.testing.check_sandbox`, so a sandbox of your own is held to
what this project's backends are held to (they are checked with it).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from io_harness.sandbox._check import _caps, _files, _network, _processes
from io_harness.sandbox._check._trial import (
    Case,
    CaseFailed,
    CaseSkipped,
    Promises,
    SandboxFactory,
    trial_of,
)

__all__ = [
    "CASES",
    "SANDBOX_CASES",
    "SandboxCase",
    "SandboxCheck",
    "SandboxFactory",
    "check_sandbox",
]

CASES: Mapping[str, Case] = {**_files.CASES, **_caps.CASES, **_processes.CASES, **_network.CASES}
"""Every case, by name, in the order they run."""

SANDBOX_CASES: tuple[str, ...] = tuple(CASES)
"""The names of every case of :func:`check_sandbox`, in the order they run."""

CaseStatus = Literal["passed", "failed", "skipped"]


@dataclass(frozen=True, slots=True)
class SandboxCase:
    """How one case went: ``passed``, ``failed`` (``detail`` says how) or ``skipped`` (why)."""

    name: str
    status: CaseStatus
    detail: str = ""


@dataclass(frozen=True, slots=True)
class SandboxCheck:
    """Every case tried, in order."""

    cases: tuple[SandboxCase, ...]

    @property
    def passed(self) -> bool:
        """No case failed (skipped ones do not count against it)."""
        return not self.failed

    @property
    def failed(self) -> tuple[SandboxCase, ...]:
        """The cases whose promise the sandbox broke."""
        return tuple(case for case in self.cases if case.status == "failed")

    def __getitem__(self, name: str) -> SandboxCase:
        for case in self.cases:
            if case.name == name:
                return case
        raise KeyError(name)

    def assert_passed(self) -> None:
        """Raise ``AssertionError`` naming every failed case and how it failed."""
        if self.failed:
            lines = [f"{case.name}: {case.detail}" for case in self.failed]
            raise AssertionError(f"{len(lines)} sandbox case(s) failed:\n" + "\n".join(lines))

    def __str__(self) -> str:
        width = max((len(case.name) for case in self.cases), default=0)
        return "\n".join(
            f"{case.status:<7}  {case.name:<{width}}  {case.detail}".rstrip() for case in self.cases
        )


async def check_sandbox(
    factory: SandboxFactory,
    *,
    confines_writes: bool = True,
    denies_network: bool = True,
    allow_list: bool | None = None,
    python: str = sys.executable,
    cases: Iterable[str] | None = None,
    case_seconds: float = 120.0,
) -> SandboxCheck:
    """Try every promise of the sandbox protocol against the sandbox ``factory`` makes.

    ``factory`` is called with the :class:`~io_harness.sandbox.SandboxConfig` a case
    needs (its caps, mode and network) and returns the sandbox to try; a backend's
    class is one. Each case runs real commands with ``python`` in a fresh workspace and
    checks what the operating system let them do: reads and writes, the network, every
    cap, processes that try to outlive the command, cancellation, unrunnable argv, the
    trace's events. Say what the sandbox does not claim (``confines_writes=False``,
    ``denies_network=False``; ``allow_list`` defaults to ``denies_network``) and those
    cases are skipped, saying why. ``cases`` picks cases by name (see :data:`SANDBOX_CASES`).
    A case still going after ``case_seconds`` is cancelled and failed. Nothing raises
    for what the sandbox does: a raise from it is the case's failure.
    """
    chosen = list(CASES) if cases is None else list(cases)
    unknown = [name for name in chosen if name not in CASES]
    if unknown:
        raise ValueError(f"unknown sandbox cases {unknown}; known: {list(CASES)}")
    promises = Promises(
        confines_writes, denies_network, denies_network if allow_list is None else allow_list
    )
    results = []
    for name in chosen:
        with trial_of(factory, promises, python) as trial:
            results.append(await _tried(name, CASES[name](trial), case_seconds))
    return SandboxCheck(tuple(results))


async def _tried(name: str, attempt: Coroutine[Any, Any, None], seconds: float) -> SandboxCase:
    try:
        await asyncio.wait_for(attempt, seconds)
    except CaseSkipped as skipped:
        return SandboxCase(name, "skipped", str(skipped))
    except CaseFailed as failed:
        return SandboxCase(name, "failed", str(failed))
    except TimeoutError:
        return SandboxCase(name, "failed", f"still going after {seconds:g} s: cancelled")
    except Exception as exc:  # the sandbox's raise is its failure, never the check's
        return SandboxCase(name, "failed", f"raised {type(exc).__name__}: {exc}")
    return SandboxCase(name, "passed")
