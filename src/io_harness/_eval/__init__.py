"""Evaluation suites: cases over providers, run concurrently, summed up per case and provider.

``_suite.py`` the suite and its TOML; ``_harnesses.py`` a run's harness from
its provider's specs; ``_workspace.py`` each run's copy of its workspace;
``_runner.py`` run_suite; ``_results.py`` records, rows and their exports.
"""

from io_harness._eval._harnesses import SpecHarnesses, SuiteRun
from io_harness._eval._results import CSV_COLUMNS, ResultRow, RunRecord, SuiteResult
from io_harness._eval._runner import LABELS, HarnessFor, run_suite
from io_harness._eval._suite import Suite, SuiteCase, SuiteProvider

__all__ = [
    "CSV_COLUMNS",
    "LABELS",
    "HarnessFor",
    "ResultRow",
    "RunRecord",
    "SpecHarnesses",
    "Suite",
    "SuiteCase",
    "SuiteProvider",
    "SuiteResult",
    "SuiteRun",
    "run_suite",
]
