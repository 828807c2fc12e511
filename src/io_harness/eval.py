"""Evaluation suites: run contracts over providers, many at once, and compare the results.

A :class:`Suite` (``Suite.from_toml("suite.toml")``, or built in Python) names
cases (each a contract run ``repeat`` times) and providers;
:func:`run_suite` runs every case with every provider, at most
``concurrency`` runs at once, each in its own copy of its workspace, and
returns a :class:`SuiteResult`: one :class:`RunRecord` per run and one
:class:`ResultRow` per case and provider, exported with ``to_json()`` and
``to_csv()``. ``ioh eval SUITE.toml`` is the same from the command line; see
``docs/eval.md``.

    from io_harness.eval import Suite, run_suite

    result = await run_suite(Suite.from_toml("suite.toml"), store=Store.open("runs.db"))
    for row in result.rows():
        print(row.case, row.provider, f"{row.pass_rate:.0%}")
"""

from io_harness._eval import (
    CSV_COLUMNS,
    LABELS,
    HarnessFor,
    ResultRow,
    RunRecord,
    SpecHarnesses,
    Suite,
    SuiteCase,
    SuiteProvider,
    SuiteResult,
    SuiteRun,
    run_suite,
)

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
