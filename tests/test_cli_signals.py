"""``ioh`` stopped from outside: Ctrl-C and SIGTERM wherever they land (the approval prompt
too), and a reader that closes ``ioh``'s stdout early (``ioh run ... | head -1``).

Each test drives a real ``ioh`` process against a local model server; the
approval prompt appears only at a terminal, so those tests give ``ioh`` a
pseudo-terminal.
"""

from __future__ import annotations

import itertools
import json
import os
import pty
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from io_harness import Store
from loopback import CapturedRequest, LoopbackServer, Reply
from support import eventually, line_from
from wire_openai import chat_stream, usage

IOH = Path(sys.executable).with_name("ioh")
WAIT = 60.0
"""The longest a test waits for ``ioh`` to get somewhere (a bound, not a measurement)."""


def write(path: str, content: str) -> Reply:
    arguments = json.dumps({"path": path, "content": content})
    return chat_stream(
        "Writing.", tool_calls=[("call_w", "write_file", arguments)], usage=usage(9, 5)
    )


def done() -> Reply:
    return chat_stream("Done.", usage=usage(9, 2))


class Project:
    """A workspace and a contract that wants ``hello`` in ``out.txt``, with ``policy``."""

    def __init__(self, tmp_path: Path, policy: str = "") -> None:
        self.tmp = tmp_path
        self.root = tmp_path / "ws"
        self.root.mkdir()
        self.contract = tmp_path / "contract.toml"
        self.contract.write_text(
            'goal = "write hello to out.txt"\nroot = "ws"\n'
            '[verify]\nkind = "workspace_file_contains"\nfile = "out.txt"\nneedle = "hello"\n'
            "[budget]\nmax_retries = 0\nmax_steps = 5\n" + policy
        )
        self.store = tmp_path / "runs.db"

    def argv(self, *words: str) -> list[str]:
        return [str(IOH), *words, "--store", str(self.store)]

    def run_argv(self, server: LoopbackServer, *extra: str) -> list[str]:
        return self.argv(
            *("run", str(self.contract), "--provider", f"compatible:{server.url}/v1#m"),
            *("--run-id", "r1", *extra),
        )

    def resume(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv("resume", "r1", "--approve", "approve-all"),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            cwd=self.tmp,
            env=environment(),
            timeout=WAIT,
            check=False,
        )

    def stored(self) -> tuple[str, str | None, int]:
        """The run's status, outcome and committed steps, as the store holds them."""
        with Store.open(self.store) as store:
            run = next(one for one in store.runs() if one.id == "r1")
        return run.status, run.outcome, run.steps


def environment() -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm-256color"}
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        env.pop(name, None)
    return env


class Terminal:
    """A pseudo-terminal ``ioh`` is given as stdin, stdout and stderr; what it shows is read
    as it comes."""

    def __init__(self) -> None:
        self.controller, self.device = pty.openpty()
        self._seen = b""
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.controller, 4096)
            except OSError:  # EIO: every copy of the device is closed
                chunk = b""
            with self._changed:
                self._seen += chunk
                self._changed.notify_all()
            if not chunk:
                return

    @property
    def text(self) -> str:
        with self._changed:
            return self._seen.decode(errors="replace")

    def wait_for(self, needle: str) -> bool:
        """Whether ``needle`` showed within :data:`WAIT` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: needle.encode() in self._seen, WAIT)

    def type(self, text: str) -> None:
        os.write(self.controller, text.encode())

    def close(self) -> None:
        os.close(self.device)
        self._reader.join(WAIT)
        os.close(self.controller)


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    opened = Terminal()
    try:
        yield opened
    finally:
        opened.close()


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(WAIT)


# -- Ctrl-C and SIGTERM --------------------------------------------------------------------


def test_the_status_line_after_an_answer_does_not_say_the_model_is_answering(
    tmp_path: Path, terminal: Terminal
) -> None:
    project = Project(tmp_path, policy='[policy]\nbase = "guarded"\n')
    answers = itertools.chain([write("out.txt", "hello\n")], itertools.repeat(done()))
    with LoopbackServer(lambda _request: next(answers)) as server:
        process = subprocess.Popen(
            project.run_argv(server, "--approve", "ask"),
            stdin=terminal.device,
            stdout=terminal.device,
            stderr=terminal.device,
            cwd=tmp_path,
            env=environment(),
            text=True,
        )
        try:
            assert terminal.wait_for("approve? [y]es"), terminal.text
            prompt_at = len(terminal.text)
            terminal.type("y\n")
            ended = process.wait(WAIT)
        finally:
            stop(process)
    assert terminal.wait_for("trace: ioh show r1"), terminal.text
    after = terminal.text[prompt_at:]

    assert ended == 0, terminal.text
    assert "step 1: going on after the decision" in after
    assert "answering" not in after


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_at_the_approval_prompt_ends_ioh_at_once_keeping_the_run(
    tmp_path: Path, terminal: Terminal, signum: int, status: int
) -> None:
    project = Project(tmp_path, policy='[policy]\nbase = "guarded"\n')
    answers = itertools.chain([write("out.txt", "hello\n")], itertools.repeat(done()))
    with LoopbackServer(lambda _request: next(answers)) as server:
        process = subprocess.Popen(
            project.run_argv(server, "--approve", "ask"),
            stdin=terminal.device,
            stdout=terminal.device,
            stderr=terminal.device,
            cwd=tmp_path,
            env=environment(),
            text=True,
        )
        try:
            assert terminal.wait_for("approve? [y]es"), terminal.text
            prompt_at = len(terminal.text)
            process.send_signal(signum)  # Ctrl-C, or a supervisor's SIGTERM, at the prompt
            try:
                ended = process.wait(WAIT)
            except subprocess.TimeoutExpired:
                pytest.fail(f"ioh did not end after {signal.Signals(signum).name}")
        finally:
            stop(process)
        assert terminal.wait_for("continues the run)"), terminal.text
        after = terminal.text[prompt_at:]

        assert ended == status, terminal.text
        assert f"(ioh resume r1 --store {project.store} continues the run)" in after
        assert "answering" not in after  # no status line claims the model answers
        assert "Traceback" not in terminal.text
        assert project.stored() == ("running", None, 0)
        assert not (project.root / "out.txt").exists()

        resumed = project.resume()

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "outcome: success" in resumed.stdout
    assert (project.root / "out.txt").read_text() == "hello\n"


def test_sigterm_while_the_model_answers_stops_with_143_keeping_the_committed_step(
    tmp_path: Path,
) -> None:
    project = Project(tmp_path)
    asked = threading.Event()
    second: list[int] = []

    def script(_request: CapturedRequest) -> Reply:
        second.append(1)
        if len(second) == 1:
            return write("notes.txt", "a first step\n")
        if len(second) == 2:
            asked.set()
            return Reply(delay=WAIT * 2)  # the model answers for a long time
        return write("out.txt", "hello\n")

    with LoopbackServer(script) as server:
        process = subprocess.Popen(
            project.run_argv(server),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env=environment(),
            text=True,
        )
        try:
            assert asked.wait(WAIT)
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=WAIT)
        finally:
            stop(process)

        assert process.returncode == 143, out + err
        assert "step 1" in out
        assert f"(ioh resume r1 --store {project.store} continues the run)" in err
        assert "Traceback" not in err
        assert project.stored() == ("running", None, 1)

        resumed = project.resume()

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "run r1 resumed" in resumed.stdout
    assert (project.root / "notes.txt").read_text() == "a first step\n"
    assert project.stored() == ("finished", "success", 2)


def test_ctrl_c_during_the_check_stops_its_command_and_ioh(tmp_path: Path) -> None:
    project = Project(tmp_path)
    pid_file = project.root / "check.pid"
    sleeper = "import os, time; open('check.pid', 'w').write(str(os.getpid())); time.sleep(600)"
    project.contract.write_text(
        'goal = "wait"\nroot = "ws"\n[verify]\nkind = "command"\n'
        f"argv = {json.dumps([sys.executable, '-c', sleeper])}\n"
        "[budget]\nmax_retries = 0\nmax_steps = 5\n"
    )
    with LoopbackServer(lambda _request: done()) as server:
        process = subprocess.Popen(
            project.run_argv(server, "--no-sandbox"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env=environment(),
            text=True,
        )
        try:
            assert eventually(lambda: pid_file.exists() and pid_file.read_text() != "", within=WAIT)
            check = int(pid_file.read_text())
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=WAIT)
        finally:
            stop(process)

    assert process.returncode == 130, out + err
    assert f"(ioh resume r1 --store {project.store} continues the run)" in err
    assert eventually(lambda: not alive(check), within=WAIT), "the check's command outlived ioh"
    assert project.stored() == ("running", None, 0)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


STUBBORN = """
import asyncio, os, signal
from io_harness.cli._signals import run_to_end, sigterm_interrupts
from io_harness.cli._words import RunInterrupted

async def stubborn() -> None:
    os.kill(os.getpid(), signal.SIGTERM)  # the first signal, while the run works
    try:
        await asyncio.sleep(600)
    except asyncio.CancelledError:
        print("cleaning up", flush=True)
        os.kill(os.getpid(), signal.SIGINT)  # the second, while its clean-up hangs
        await asyncio.sleep(600)

with sigterm_interrupts():
    try:
        run_to_end(stubborn())
    except RunInterrupted as exc:
        print("interrupted by", signal.Signals(exc.signum).name, flush=True)
print("handlers", signal.getsignal(signal.SIGTERM) is signal.SIG_DFL,
      signal.getsignal(signal.SIGINT) is signal.default_int_handler)
"""


def test_a_second_signal_stops_waiting_for_a_clean_up_that_hangs() -> None:
    done = subprocess.run(
        [sys.executable, "-c", STUBBORN], capture_output=True, text=True, timeout=WAIT, check=False
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "cleaning up",
        "interrupted by SIGTERM",
        "handlers True True",
    ]
    assert done.stderr == ""


# -- a closed stdout -----------------------------------------------------------------------


def test_a_closed_stdout_stops_the_printing_not_the_run(tmp_path: Path) -> None:
    project = Project(tmp_path)
    closed = threading.Event()

    def script(_request: CapturedRequest) -> Reply:
        closed.wait(WAIT)  # answer once nobody reads ioh's stdout any more
        return write("out.txt", "hello\n")

    with LoopbackServer(script) as server:
        process = subprocess.Popen(
            project.run_argv(server),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env=environment(),
            text=True,
        )
        try:
            assert process.stdout is not None
            first = line_from(process, WAIT)  # as `ioh run ... | head -1` does
            process.stdout.close()
            closed.set()
            _, err = process.communicate(timeout=WAIT)
        finally:
            closed.set()
            stop(process)

    assert "run r1 started" in first
    assert process.returncode == 0, err
    assert "Traceback" not in err
    assert "stdout is closed, so nothing more is printed there; the run goes on" in err
    assert f"(ioh show r1 --store {project.store} shows it)" in err
    assert project.stored() == ("finished", "success", 1)
    assert (project.root / "out.txt").read_text() == "hello\n"
