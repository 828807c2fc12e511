"""The one output capper, and run_process's truncation as data: a count, never the text."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from io_harness._process import CappedOutput, run_process

PY = sys.executable
MARKER = "[... 12 bytes of output cut here ...]"
"""What the capper writes where it cuts, as a command might print it."""


def test_a_stream_past_its_keep_is_kept_head_and_tail_with_the_cut_counted() -> None:
    output = CappedOutput(8)
    output.feed("stdout", b"abcdef")
    output.feed("stdout", b"ghijkl")

    assert output.text("stdout") == "abcd\n[... 4 bytes of output cut here ...]\nijkl"
    assert (output.dropped, output.truncated) == (4, True)
    assert output.text("stderr") == ""


def test_a_stream_within_its_keep_is_whole_and_not_truncated() -> None:
    output = CappedOutput(8)
    output.feed("stderr", b"abc")
    output.feed("stderr", b"defgh")

    assert output.text("stderr") == "abcdefgh"
    assert (output.dropped, output.truncated) == (0, False)


def test_text_that_looks_like_a_cut_is_not_one() -> None:
    output = CappedOutput(1 << 10)
    output.feed("stdout", f"head\n{MARKER}\ntail".encode())

    assert not output.truncated
    assert output.text("stdout") == f"head\n{MARKER}\ntail"


def test_both_streams_count_towards_one_limit() -> None:
    calls: list[str] = []
    output = CappedOutput(1 << 10, limit=100, on_limit=lambda: calls.append("over"))
    output.feed("stdout", b"x" * 60)
    assert (output.over_limit, calls) == (False, [])

    output.feed("stderr", b"y" * 60)

    assert (output.over_limit, calls) == (True, ["over"])
    assert not output.truncated  # nothing was cut: the caller decides what passing the limit means


def test_without_a_limit_no_amount_is_over_it() -> None:
    output = CappedOutput(4)
    output.feed("stdout", b"z" * 10_000)
    assert not output.over_limit
    assert output.dropped == 10_000 - 4


def test_draining_a_pipe_reads_it_to_the_end_and_closes_it() -> None:
    output = CappedOutput(10)
    read, write = os.pipe()
    os.write(write, b"0123456789" * 3)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        output.drain("stderr", pipe)
        assert pipe.closed
    assert output.text("stderr") == "01234\n[... 20 bytes of output cut here ...]\n56789"


async def test_a_command_that_prints_the_marker_is_not_truncated(tmp_path: Path) -> None:
    script = f"print('head'); print({MARKER!r}); print('tail')"
    outcome = await run_process([PY, "-c", script], cwd=tmp_path, timeout=60)

    assert outcome.exit_code == 0, outcome.stderr
    assert not outcome.truncated
    assert outcome.stdout == f"head\n{MARKER}\ntail\n"


async def test_a_command_that_prints_past_the_cap_is_truncated(tmp_path: Path) -> None:
    script = "import sys; sys.stderr.write('a' * 5000 + 'b' * 5000)"
    outcome = await run_process([PY, "-c", script], cwd=tmp_path, timeout=60, output_cap=1000)

    assert outcome.truncated
    assert outcome.stderr == "a" * 500 + "\n[... 9000 bytes of output cut here ...]\n" + "b" * 500


async def test_a_command_that_cannot_start_is_not_truncated(tmp_path: Path) -> None:
    outcome = await run_process([str(tmp_path / "missing")], cwd=tmp_path, timeout=60)
    assert outcome.spawn_error is not None
    assert not outcome.truncated
