"""The harness's pytest runner: runs criterion tests and records what each did.

Run as a script (``python -I -B _pytest_runner.py RECORD SUBJECT_DIR TESTS_DIR``),
never imported by the harness. It puts the subject's folder on ``sys.path``,
runs pytest over the criterion tests only, and appends one JSON line per event
to RECORD: what was collected, each test phase's outcome, and a final line when
the session finished. The harness judges from that record, not from the exit
status, so a subject that ends the interpreter early leaves no final line and
fails the check.
"""

import json
import os
import sys
from typing import Any


class _Recorder:
    def __init__(self, path: str) -> None:
        self._handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 (held for the session)

    def _write(self, **event: object) -> None:
        self._handle.write(json.dumps(event) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self._write(
                event="collect_error",
                nodeid=report.nodeid,
                detail=str(report.longrepr)[-4000:],
            )

    def pytest_collection_finish(self, session: Any) -> None:
        self._write(event="collected", nodeids=[item.nodeid for item in session.items])

    def pytest_runtest_logreport(self, report: Any) -> None:
        self._write(
            event="report",
            nodeid=report.nodeid,
            when=report.when,
            outcome=report.outcome,
        )

    def pytest_sessionfinish(self, session: Any, exitstatus: int) -> None:
        self._write(event="finished", exitstatus=int(exitstatus))


def main() -> int:
    record, subject_dir, tests_dir = sys.argv[1:4]
    sys.path.insert(0, subject_dir)
    import pytest

    config = os.path.join(tests_dir, "pytest.ini")
    args = [tests_dir, "-q", "-c", config, "-p", "no:cacheprovider", "--noconftest"]
    return int(pytest.main(args, plugins=[_Recorder(record)]))


if __name__ == "__main__":
    sys.exit(main())
