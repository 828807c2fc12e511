"""PROVISIONAL (the lead replaces this file): select() and probe() signatures only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from io_harness.sandbox._direct import run_direct
from io_harness.sandbox._types import (
    NetCheck,
    SandboxConfig,
    SandboxEvent,
    SandboxLimits,
    SandboxMode,
    SandboxOutcome,
)

__all__ = ["BackendReport", "probe", "select"]


@dataclass(frozen=True, slots=True)
class BackendReport:
    """What one backend can do on this machine, for ``ioh doctor`` and the trace."""

    name: str
    available: bool
    reason: str
    denies_network: bool


class _Provisional:
    def __init__(self, config: SandboxConfig) -> None:
        self._config = config

    @property
    def name(self) -> str:
        return "floor"

    @property
    def config(self) -> SandboxConfig:
        return self._config

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
        limits = limits or self._config.limits
        out = await run_direct(argv, cwd=workdir, timeout=limits.wall_seconds, env=env, stdin=stdin)
        events = (
            SandboxEvent("create", self.name, {"mode": mode or self._config.mode, "limits": limits.record()}),
            SandboxEvent("exec", self.name, {"argv": list(out.argv), "duration": out.duration}),
            SandboxEvent("destroy", self.name, {}),
        )
        return SandboxOutcome(
            backend=self.name, argv=out.argv, exit_code=out.exit_code, signal=out.signal,
            cap_hit=out.cap_hit, stdout=out.stdout, stderr=out.stderr, truncated=out.truncated,
            duration=out.duration, spawn_error=out.spawn_error, events=events,
        )


def select(config: SandboxConfig | None = None) -> _Provisional:
    """The first backend of this platform's chain that gives ``config``."""
    return _Provisional(config or SandboxConfig())


def probe() -> list[BackendReport]:
    """Every backend of every platform, and whether this machine offers it."""
    return [BackendReport("floor", True, "always available", False)]
