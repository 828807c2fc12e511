"""Truncation through the public paths: the count of cut bytes says it, never the text.

A command may print the capper's marker itself; neither ``run_direct`` (the
``NO_SANDBOX`` path) nor a ``select()``ed sandbox may take that for a cut.
"""

from __future__ import annotations

import sys
from pathlib import Path

from io_harness._process import OUTPUT_CAP_BYTES
from io_harness.sandbox import Sandbox, SandboxConfig, SandboxLimits, run_direct, select

PY = sys.executable
MARKER = "[... 12 bytes of output cut here ...]"
PRINTS_MARKER = [PY, "-c", f"import sys; print('head'); print({MARKER!r}, file=sys.stderr)"]


def flood(size: int) -> list[str]:
    """A command that writes ``size`` bytes to stdout."""
    return [PY, "-c", f"import sys; sys.stdout.write('x' * {size})"]


def sandbox(**limits: float) -> Sandbox:
    """This platform's sandbox, with ``limits`` (accepted where it cannot deny the network)."""
    config = SandboxConfig(
        limits=SandboxLimits(**{"wall_seconds": 60, **limits}), accept_floor=True
    )
    return select(config)


async def test_run_direct_does_not_take_a_printed_marker_for_a_cut(tmp_path: Path) -> None:
    outcome = await run_direct(PRINTS_MARKER, cwd=tmp_path, timeout=60)

    assert outcome.exit_code == 0, outcome.stderr
    assert not outcome.truncated
    assert (outcome.stdout, outcome.stderr) == ("head\n", f"{MARKER}\n")


async def test_run_direct_reports_output_past_its_cap_as_truncated(tmp_path: Path) -> None:
    outcome = await run_direct(flood(3 * OUTPUT_CAP_BYTES), cwd=tmp_path, timeout=60)

    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.truncated
    assert f"[... {2 * OUTPUT_CAP_BYTES} bytes of output cut here ...]" in outcome.stdout


async def test_a_sandbox_does_not_take_a_printed_marker_for_a_cut(tmp_path: Path) -> None:
    outcome = await sandbox().run(PRINTS_MARKER, workdir=tmp_path)

    assert outcome.exit_code == 0, (outcome.summary, outcome.stderr)
    assert not outcome.truncated
    assert (outcome.stdout, outcome.stderr) == ("head\n", f"{MARKER}\n")


async def test_a_sandbox_reports_output_it_cut_as_truncated(tmp_path: Path) -> None:
    # Under the output cap, so nothing is killed: only the capper's keep cuts it.
    outcome = await sandbox().run(flood(3 * OUTPUT_CAP_BYTES), workdir=tmp_path)

    assert (outcome.exit_code, outcome.cap_hit) == (0, None), (outcome.summary, outcome.stderr)
    assert outcome.truncated
    assert f"[... {2 * OUTPUT_CAP_BYTES} bytes of output cut here ...]" in outcome.stdout


async def test_a_sandbox_reports_output_past_the_output_cap_as_truncated(tmp_path: Path) -> None:
    outcome = await sandbox(output_bytes=1000).run(flood(100_000), workdir=tmp_path)

    assert (outcome.cap_hit, outcome.truncated) == ("output", True)
