"""A pytest plugin that records what each test did, for the harness to judge.

Loaded into pytest runs the harness starts (``-p ioh_record``), it appends one
JSON line per event to the file named by ``IOH_PYTEST_RECORD``: what was
collected, each collection error, each test phase's outcome, and a final line
when the session finished. A process that ends early leaves no final line.
This file is imported by name from its own folder, never as part of
io_harness, so it depends on nothing but the standard library and pytest.
"""

import json
import os
from typing import Any

_PATH = os.environ.get("IOH_PYTEST_RECORD", "")


def _write(**event: object) -> None:
    if not _PATH:
        return
    with open(_PATH, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(event) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def pytest_collectreport(report: Any) -> None:
    if report.failed:
        _write(event="collect_error", nodeid=report.nodeid)


def pytest_collection_finish(session: Any) -> None:
    _write(event="collected", nodeids=[item.nodeid for item in session.items])


def pytest_runtest_logreport(report: Any) -> None:
    _write(event="report", nodeid=report.nodeid, when=report.when, outcome=report.outcome)


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    _write(event="finished", exitstatus=int(exitstatus))
