"""`io_harness.testing.check_sandbox` holds a sandbox of a user's own to the protocol.

A sandbox that breaks a promise fails that case, naming how, and no other; what it
does not claim is skipped, saying why; the check itself never raises for what the
sandbox does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from io_harness.sandbox import (
    FloorSandbox,
    NetCheck,
    SandboxConfig,
    SandboxLimits,
    SandboxMode,
    SandboxOutcome,
)
from io_harness.testing import SandboxCheck, check_sandbox


class UsersSandbox:
    """A user's sandbox: the floor underneath, with one thing done wrong by a subclass."""

    def __init__(self, config: SandboxConfig) -> None:
        self._floor = FloorSandbox(config)

    @property
    def name(self) -> str:
        return "users-own"

    @property
    def config(self) -> SandboxConfig:
        return self._floor.config

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
        return await self._floor.run(
            argv,
            workdir=workdir,
            env=self.env(env),
            limits=limits,
            mode=mode,
            readable=readable,
            writable=writable,
            stdin=stdin,
            net_check=net_check,
        )

    def env(self, asked: Mapping[str, str] | None) -> Mapping[str, str] | None:
        return asked


class IgnoresTheWallCap(UsersSandbox):
    def __init__(self, config: SandboxConfig) -> None:
        endless = config.limits.model_copy(update={"wall_seconds": 3600.0})
        super().__init__(config.model_copy(update={"limits": endless}))


class LeaksTheEnvironment(UsersSandbox):
    def env(self, asked: Mapping[str, str] | None) -> Mapping[str, str] | None:
        return {**os.environ, **(asked or {})}


class Raises(UsersSandbox):
    async def run(self, argv: Sequence[str], **given: object) -> SandboxOutcome:
        raise RuntimeError("the user's sandbox fell over")


SOME = ["reading_the_workspace_works", "wall_cap_kills", "the_harness_environment_does_not_leak"]


async def test_a_sandbox_that_keeps_its_promises_passes() -> None:
    check = await check_sandbox(
        UsersSandbox, confines_writes=False, denies_network=False, cases=SOME
    )
    assert [(case.name, case.status) for case in check.cases] == [(n, "passed") for n in SOME]
    assert check.passed
    check.assert_passed()


async def test_a_sandbox_that_ignores_the_wall_cap_fails_that_case_alone() -> None:
    check = await check_sandbox(
        IgnoresTheWallCap, confines_writes=False, denies_network=False, cases=SOME, case_seconds=10
    )
    assert [case.name for case in check.failed] == ["wall_cap_kills"]
    assert "still going after 10 s" in check["wall_cap_kills"].detail
    with pytest.raises(AssertionError, match="wall_cap_kills: still going"):
        check.assert_passed()


async def test_a_sandbox_that_leaks_the_harness_environment_fails_that_case() -> None:
    check = await check_sandbox(
        LeaksTheEnvironment, confines_writes=False, denies_network=False, cases=SOME
    )
    assert [case.name for case in check.failed] == ["the_harness_environment_does_not_leak"]
    assert "reached the command" in check.failed[0].detail
    assert "sk-not-for-commands" in check.failed[0].detail  # what the command printed


async def test_a_sandbox_claiming_what_it_does_not_do_fails_the_claims() -> None:
    claimed = ["writes_outside_the_workspace_fail", "a_loopback_server_on_the_host_is_unreachable"]
    check = await check_sandbox(FloorSandbox, cases=claimed)
    assert [case.name for case in check.failed] == claimed
    assert "a write outside the workspace succeeded" in check.failed[0].detail


async def test_what_a_sandbox_does_not_claim_is_skipped_saying_why() -> None:
    check = await check_sandbox(
        UsersSandbox,
        confines_writes=False,
        denies_network=False,
        cases=["writes_outside_the_workspace_fail", "dns_fails"],
    )
    assert [(case.status, case.detail) for case in check.cases] == [
        ("skipped", "confines no writes"),
        ("skipped", "does not deny the network"),
    ]
    assert check.passed
    assert str(check).splitlines()[0].split() == [
        "skipped",
        "writes_outside_the_workspace_fail",
        "confines",
        "no",
        "writes",
    ]


async def test_a_sandbox_that_raises_fails_every_case_and_the_check_goes_on() -> None:
    check: SandboxCheck = await check_sandbox(
        Raises, confines_writes=False, denies_network=False, cases=SOME
    )
    assert [case.status for case in check.cases] == ["failed"] * 3
    assert all("RuntimeError: the user's sandbox fell over" in c.detail for c in check.cases)


async def test_an_unknown_case_is_named() -> None:
    with pytest.raises(ValueError, match="unknown sandbox cases \\['wall_cap'\\]"):
        await check_sandbox(UsersSandbox, cases=["wall_cap"])
