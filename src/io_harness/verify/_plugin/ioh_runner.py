"""The harness's pytest runner for ``PytestPasses``.

Run as a script: ``python -I -B ioh_runner.py SUBJECT_DIR TESTS_DIR``, with
``IOH_PYTEST_RECORD`` naming the record file. It runs pytest over the
criterion tests only, with the runner's own configuration and the
``ioh_record`` plugin. The subject's folder joins ``sys.path`` only when the
session starts, after pytest and its plugins are imported, so a subject file
cannot stand in for pytest or one of its plugins.
"""

import importlib
import os
import sys
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ioh_record = importlib.import_module("ioh_record")  # the plugin beside this file


class _SubjectOnPath:
    def __init__(self, folder: str) -> None:
        self.folder = folder

    def pytest_sessionstart(self, session: Any) -> None:
        sys.path.insert(0, self.folder)


def main() -> int:
    subject_dir, tests_dir = sys.argv[1:3]
    config = os.path.join(tests_dir, "pytest.ini")
    args = [tests_dir, "-q", "-c", config, "-p", "no:cacheprovider", "--noconftest"]
    return int(pytest.main(args, plugins=[ioh_record, _SubjectOnPath(subject_dir)]))


if __name__ == "__main__":
    sys.exit(main())
