"""The harness's pytest runner for ``PytestPasses``.

Run as a script from a folder the harness owns::

    python -I -B ioh_runner.py SUBJECT_DIR TESTS_DIR RECORD_FILE

with the run's key as hex on the first line of standard input. Before any
subject code can run it imports pytest's outcome machinery, reads the key and
opens the signed record (see ``ioh_record``). It then runs pytest over the
criterion tests only, with the runner's own ini file, no conftest, no cache
and no plugin but the recorder. When the session starts the guard
(``ioh_guard``) takes its look, and only then does the subject's folder join
``sys.path``. At the end the runner records its exit status and leaves with
``os._exit``, so no ``atexit`` hook of the subject's can change that status.
"""

import builtins as _builtins_module

# Resolve builtins through a copy taken before any subject code runs (see ioh_record).
globals()["__builtins__"] = dict(vars(_builtins_module))

import contextlib  # noqa: E402
import importlib  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ioh_record = importlib.import_module("ioh_record")  # the plugin and guard beside this file
ioh_guard = importlib.import_module("ioh_guard")
sys.path.pop(0)
for _name in ioh_guard.OUTCOME_MODULES:  # imported now, so the guard sees them as they are
    with contextlib.suppress(ImportError):  # a module this pytest version does not have
        importlib.import_module(_name)

_exit = os._exit
_flush_out = sys.stdout.flush
_flush_err = sys.stderr.flush

TEST_FILE = "test_criterion.py"
"""The criterion tests' file in ``TESTS_DIR``."""
INI_FILE = "pytest.ini"
"""The runner's own pytest configuration in ``TESTS_DIR``."""


def main() -> int:
    """Run the criterion tests and record them; the exit status is pytest's."""
    subject_dir, tests_dir, record_path = sys.argv[1:4]
    record = ioh_record.Record(record_path, ioh_record.read_key())
    guard = ioh_guard.Guard([ioh_record, ioh_guard, sys.modules[__name__]])
    test_file = os.path.join(tests_dir, TEST_FILE)
    recorder = ioh_record.Recorder(record, guard, subject_dir=subject_dir, test_file=test_file)
    record.write("start")
    args = [
        test_file,
        "-q",
        "-c",
        os.path.join(tests_dir, INI_FILE),
        "--rootdir",
        tests_dir,
        "--noconftest",
        "-p",
        "no:cacheprovider",
    ]
    try:
        status = int(pytest.main(args, plugins=[recorder]))
    except BaseException as exc:  # whatever escaped pytest ends the run, and says so
        print(f"the runner stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
        status = 3
    record.write("exit", status=status)
    return status


if __name__ == "__main__":
    code = main()
    try:
        _flush_out()
        _flush_err()
    finally:
        _exit(code)
