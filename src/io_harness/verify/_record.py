"""The signed record the ``ioh_record`` pytest plugin writes, read back and judged by the harness.

Both execution criteria that run pytest judge from this record, never from
the exit status alone. The record is accepted only whole: every line signed
with this run's key, numbered from 0 without a gap or repeat, written by one
process, and ending the way a finished session ends. A session that did not
finish, failed to collect, ran no test, or saw its outcome machinery changed
does not pass.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["PLUGIN_DIR", "PytestRecord", "RunKey", "copy_plugin", "record_env"]

PLUGIN_DIR = Path(__file__).with_name("_plugin")
"""Where ``ioh_record`` (the plugin), ``ioh_guard`` and ``ioh_runner`` (the PytestPasses
runner and its guard) live."""

_PARAMS = re.compile(r"\[.*\]$")
_MAX_RECORD_BYTES = 64 << 20
_MAX_TAMPER_SHOWN = 10


class RunKey:
    """A fresh key for one run's record; the process under test gets it on stdin."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    @property
    def stdin(self) -> bytes:
        """What the runner or plugin reads first from its standard input."""
        return self._key.hex().encode("ascii") + b"\n"

    def sign(self, body: bytes) -> str:
        """The MAC a line with ``body`` must carry."""
        return hmac.new(self._key, body, hashlib.sha256).hexdigest()


def copy_plugin(folder: Path, *, module: str = "ioh_record", runner: bool = False) -> Path:
    """Copy the plugin (as ``module``) and with ``runner`` the guard and runner into ``folder``.

    The copies live in a folder the harness made for this run, not in the
    installed package, so the sandbox needs to show the command nothing else of
    io_harness.
    """
    shutil.copyfile(PLUGIN_DIR / "ioh_record.py", folder / f"{module}.py")
    if runner:
        for name in ("ioh_guard.py", "ioh_runner.py"):
            shutil.copyfile(PLUGIN_DIR / name, folder / name)
    return folder


def record_env(
    record: Path, *, python_path: Path | None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a pytest run that records to ``record``.

    It starts from ``base`` (``None``: the harness's environment; a sandbox
    adds its own basics to an empty one). ``PYTEST_ADDOPTS`` and
    ``PYTEST_PLUGINS`` are removed so the harness's options are the ones in
    force; with ``python_path`` that folder leads ``PYTHONPATH``.
    """
    env = {
        k: v
        for k, v in (os.environ if base is None else base).items()
        if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")
    }
    env["IOH_PYTEST_RECORD"] = str(record)
    if python_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(python_path), env.get("PYTHONPATH", "")) if p
        )
    return env


def test_name(nodeid: str) -> str:
    """``file.py::Class::test_x[param]`` → ``Class::test_x``."""
    return _PARAMS.sub("", nodeid.split("::", 1)[-1])


@dataclass
class PytestRecord:
    """What one pytest session did, as its signed record says."""

    rejected: str | None = None
    """Why the record as a whole is not to be believed, if it is not."""
    started: bool = False
    finished: bool = False
    exit_status: int | None = None
    """The status the runner recorded as it left (``PytestPasses`` runs only)."""
    collected: list[str] = field(default_factory=list)
    collect_errors: list[str] = field(default_factory=list)
    collect_skips: list[str] = field(default_factory=list)
    """Collectors skipped whole (a module-level ``pytest.skip``)."""
    passed: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)
    """Tests that failed in any phase, with the phase."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Tests skipped (or expected to fail) in setup or call, with the phase."""
    tampering: list[str] = field(default_factory=list)
    """What the runner's guard saw changed in pytest, pluggy or the runner."""

    @classmethod
    def read(cls, path: Path, key: RunKey, *, runner: bool) -> PytestRecord:
        """The record in ``path``, checked line by line against ``key``.

        With ``runner`` (a ``PytestPasses`` run), the last line must be the
        runner's exit line; without, the session's finished line.
        """
        record = cls()
        if not path.exists():
            record.rejected = "the pytest session never started (there is no record)"
            return record
        if path.stat().st_size > _MAX_RECORD_BYTES:
            record.rejected = "the record is larger than any session writes"
            return record
        lines = path.read_bytes().split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        if not lines:
            record.rejected = "the pytest session never started (the record is empty)"
            return record
        first_pid: object = None
        last: str | None = None
        for number, line in enumerate(lines):
            problem, event = _verified(line, number, key)
            if problem is None and event is not None:
                if number == 0:
                    first_pid = event.get("pid")
                elif event.get("pid") != first_pid:
                    problem = "was written by another process than the session's"
            if problem is not None or event is None:
                record.rejected = f"line {number + 1} of the record {problem}"
                return record
            record._add(event)
            last = str(event.get("event"))
        record.passed -= set(record.failed) | set(record.skipped)
        ending = "exit" if runner else "finished"
        if not record.started:
            record.rejected = "the record does not begin with the session's start"
        elif record.finished and last != ending:
            record.rejected = f"the record does not end with the session's {ending} line"
        return record

    def _add(self, event: Mapping[str, Any]) -> None:
        kind, nodeid = event.get("event"), str(event.get("nodeid", ""))
        if kind == "start":
            self.started = True
        elif kind == "finished":
            self.finished = True
        elif kind == "exit":
            status = event.get("status")
            self.exit_status = status if isinstance(status, int) else None
        elif kind == "tamper":
            self.tampering.append(str(event.get("what", "")))
        elif kind == "collected":
            self.collected = [str(n) for n in event.get("nodeids", [])]
        elif kind == "collect_error":
            self.collect_errors.append(nodeid or "the test module")
        elif kind == "collect_skipped":
            self.collect_skips.append(nodeid or "the test module")
        elif kind == "report":
            when, outcome = event.get("when"), event.get("outcome")
            if outcome == "passed" and when == "call":
                self.passed.add(nodeid)
            elif outcome == "failed":
                self.failed.setdefault(nodeid, f"failed in {when}")
            elif outcome == "skipped":
                self.skipped.setdefault(nodeid, f"skipped in {when}")

    def _broken(self) -> str | None:
        if self.rejected:
            return f"the harness's record of the session is rejected: {self.rejected}"
        if self.tampering:
            shown = self.tampering[:_MAX_TAMPER_SHOWN]
            more = len(self.tampering) - len(shown)
            return (
                "code under test changed the criterion or its runner: "
                + "; ".join(shown)
                + (f"; and {more} more" if more else "")
            )
        if not self.finished:
            return "the pytest session ended before it finished (the process exited early)"
        if self.collect_errors:
            return "collecting tests failed: " + ", ".join(self.collect_errors)
        return None

    def _skipped_modules(self) -> list[str]:
        return [f"{name}: skipped as it was collected" for name in self.collect_skips]

    def judge_defined(self, expected: list[str]) -> tuple[bool, str]:
        """Whether every test in ``expected`` (``name`` or ``Class::name``) ran and passed."""
        broken = self._broken()
        if broken:
            return False, broken
        passed_names = {test_name(n) for n in self.passed}
        not_passed = sorted({**self.skipped, **self.failed}.items())
        problems = self._skipped_modules()
        problems += [f"{test_name(n)}: {why}" for n, why in not_passed]
        seen = {test_name(n) for n, _ in not_passed}
        problems += [f"{name}: did not run" for name in expected if name not in passed_names | seen]
        if problems or not self.passed:
            return False, "criterion tests that did not pass:\n" + "\n".join(
                f"- {p}" for p in problems or ["no test ran"]
            )
        if self.exit_status != 0:
            return False, f"the runner recorded exit status {self.exit_status}, not 0"
        return True, f"all {len(self.passed)} criterion tests passed"

    def judge_suite(self) -> tuple[bool, str]:
        """Whether the session finished with at least one test passed and none failed."""
        broken = self._broken()
        if broken:
            return False, broken
        if self.failed:
            names = sorted(self.failed)
            shown = ", ".join(names[:10]) + (
                f" and {len(names) - 10} more" if len(names) > 10 else ""
            )
            return False, f"{len(names)} tests failed: {shown}"
        if not self.passed:
            return False, "no test ran and passed"
        return True, f"{len(self.passed)} tests passed"


def _verified(line: bytes, number: int, key: RunKey) -> tuple[str | None, Mapping[str, Any] | None]:
    """Why line ``number`` is not one the plugin signed, or its event."""
    mac, _, body = line.partition(b" ")
    try:
        mac_text = mac.decode("ascii")
    except UnicodeDecodeError:
        return "is not signed with this run's key", None
    if not hmac.compare_digest(mac_text, key.sign(body)):
        return "is not signed with this run's key", None
    try:
        event = json.loads(body)
    except ValueError:
        return "is not a record line", None
    if not isinstance(event, Mapping):
        return "is not a record line", None
    if event.get("seq") != number:
        return f"is numbered {event.get('seq')!r} where {number} belongs (a gap or a repeat)", None
    return None, event
