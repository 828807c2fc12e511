"""The record the ``ioh_record`` pytest plugin writes, read back and judged by the harness.

Both execution criteria that run pytest judge from this record, never from
the exit status alone: a session that did not finish, failed to collect, or
ran no test does not pass.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["PLUGIN_DIR", "PytestRecord", "record_env"]

PLUGIN_DIR = Path(__file__).with_name("_plugin")
"""Where ``ioh_record`` (the plugin) and ``ioh_runner`` (the PytestPasses runner) live."""

_PARAMS = re.compile(r"\[.*\]$")


def record_env(record: Path, *, python_path: bool) -> dict[str, str]:
    """The environment of a pytest run that records to ``record``.

    ``PYTEST_ADDOPTS`` is removed so the harness's options are the ones in force;
    with ``python_path`` the plugin's folder leads ``PYTHONPATH``.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["IOH_PYTEST_RECORD"] = str(record)
    if python_path:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(PLUGIN_DIR), os.environ.get("PYTHONPATH", "")) if p
        )
    return env


def test_name(nodeid: str) -> str:
    """``file.py::Class::test_x[param]`` → ``Class::test_x``."""
    return _PARAMS.sub("", nodeid.split("::", 1)[-1])


@dataclass
class PytestRecord:
    """What one pytest session did, as the plugin recorded it."""

    finished: bool = False
    collected: list[str] = field(default_factory=list)
    collect_errors: list[str] = field(default_factory=list)
    passed: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)
    """Tests that failed in any phase, with the phase."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Tests skipped (or expected to fail) in setup or call, with the phase."""
    unreadable_lines: int = 0

    @classmethod
    def read(cls, path: Path) -> PytestRecord:
        """The record in ``path``; an absent file is a session that never started."""
        record = cls()
        if not path.exists():
            return record
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                record.unreadable_lines += 1
                continue
            if isinstance(event, Mapping):
                record._add(event)
            else:
                record.unreadable_lines += 1
        record.passed -= set(record.failed) | set(record.skipped)
        return record

    def _add(self, event: Mapping[str, Any]) -> None:
        kind, nodeid = event.get("event"), str(event.get("nodeid", ""))
        if kind == "finished":
            self.finished = True
        elif kind == "collected":
            self.collected = [str(n) for n in event.get("nodeids", [])]
        elif kind == "collect_error":
            self.collect_errors.append(nodeid or "the test module")
        elif kind == "report":
            when, outcome = event.get("when"), event.get("outcome")
            if outcome == "passed" and when == "call":
                self.passed.add(nodeid)
            elif outcome == "failed":
                self.failed.setdefault(nodeid, f"failed in {when}")
            elif outcome == "skipped":
                self.skipped.setdefault(nodeid, f"skipped in {when}")

    def _broken(self) -> str | None:
        if not self.finished:
            return "the pytest session ended before it finished (the process exited early)"
        if self.collect_errors:
            return "collecting tests failed: " + ", ".join(self.collect_errors)
        if self.unreadable_lines:
            return "the harness's record of the session holds lines it did not write"
        return None

    def judge_defined(self, expected: list[str]) -> tuple[bool, str]:
        """Whether every test in ``expected`` (``name`` or ``Class::name``) ran and passed."""
        broken = self._broken()
        if broken:
            return False, broken
        passed_names = {test_name(n) for n in self.passed}
        not_passed = sorted({**self.skipped, **self.failed}.items())
        problems = [f"{test_name(n)}: {why}" for n, why in not_passed]
        seen = {test_name(n) for n, _ in not_passed}
        problems += [f"{name}: did not run" for name in expected if name not in passed_names | seen]
        if problems or not self.passed:
            return False, "criterion tests that did not pass:\n" + "\n".join(
                f"- {p}" for p in problems or ["no test ran"]
            )
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
