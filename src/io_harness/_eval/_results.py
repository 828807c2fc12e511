"""What a suite's runs came to: one record a run, one row per case and provider, exports.

A row's figures, over the runs of one case with one provider:

- ``passed``: runs whose criterion passed (outcome ``success``);
- ``first_try``: runs that passed and whose model was never shown a failing
  check, i.e. no check failed when the model ended its turn (trigger
  ``turn_ended``) before the one that passed. The harness also checks after
  every step that changes a file, without showing the model the result, so
  a failure there is not a try: a fix made in two edits still passes first try;
- ``median_steps``: the median of the runs' steps (answered model calls);
- ``tokens``: input plus output tokens, summed over the runs;
- ``cost_micros``: priced spend summed over the runs, in micro-units of
  ``currency``; ``currency`` is ``None`` when the runs had no price table,
  and ``unpriced_calls`` counts answered calls the table had no price for;
- ``median_seconds``: the median of the runs' wall time, start to end;
- ``failures``: why the other runs did not pass, counted: their outcome
  (``step_cap_reached``), with the error kind after a colon when an error
  ended them (``provider_failed: bad_request``, ``error: refused``).
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict

from io_harness.pricing import MICROS

__all__ = ["RAISED", "ResultRow", "RunRecord", "SuiteResult"]

RAISED = "error"
"""The outcome of a run that raised instead of ending (a policy refusing its check, say)."""

CSV_COLUMNS = (
    "case",
    "provider",
    "runs",
    "passed",
    "pass_rate",
    "first_try",
    "first_try_rate",
    "median_steps",
    "tokens",
    "cost",
    "currency",
    "unpriced_calls",
    "median_seconds",
    "failures",
)
"""The CSV export's header, in order."""


class RunRecord(BaseModel):
    """One run of a suite: which case, provider and repeat, and how it ended."""

    model_config = ConfigDict(frozen=True)

    case: str
    provider: str
    repeat: int
    """Which of the case's repeats, from 1."""
    run_id: str | None
    """The stored run; ``None`` when the run raised before it was stored."""
    outcome: str
    """The run's outcome (``success``, ``step_cap_reached``, ...), or ``error`` when it raised."""
    first_try: bool
    """It passed, and no check failed when the model ended its turn before."""
    steps: int
    tokens: int
    cost_micros: int
    unpriced_calls: int
    currency: str | None
    """The currency of the run's price table; ``None``: it had none (unpriced)."""
    seconds: float
    """Wall time from the run's start to its end."""
    error_kind: str | None = None
    """The provider error's kind when one ended the run; a raised error's
    (``config``, ``refused``, ``sandbox``, ``mcp``, ``storage``, ``internal``)."""
    error: str | None = None
    """The error's message."""

    @property
    def passed(self) -> bool:
        """Whether the criterion passed."""
        return self.outcome == "success"

    @property
    def failure(self) -> str | None:
        """Why it did not pass (``None``: it passed): its outcome, and any error's kind."""
        if self.passed:
            return None
        return f"{self.outcome}: {self.error_kind}" if self.error_kind else self.outcome


class ResultRow(BaseModel):
    """The runs of one case with one provider, summed up; the module's docstring defines
    each figure. ``case`` is ``None`` in a provider's total over every case."""

    model_config = ConfigDict(frozen=True)

    case: str | None
    provider: str
    runs: int
    passed: int
    first_try: int
    median_steps: float | None
    tokens: int
    cost_micros: int
    currency: str | None
    unpriced_calls: int
    median_seconds: float | None
    failures: dict[str, int]

    @property
    def pass_rate(self) -> float:
        """``passed`` over ``runs`` (0 when there were none)."""
        return self.passed / self.runs if self.runs else 0.0

    @property
    def first_try_rate(self) -> float:
        """``first_try`` over ``runs`` (0 when there were none)."""
        return self.first_try / self.runs if self.runs else 0.0

    @property
    def cost(self) -> Decimal | None:
        """``cost_micros`` in units of ``currency``; ``None`` when unpriced."""
        return None if self.currency is None else Decimal(self.cost_micros) / MICROS

    @classmethod
    def of(cls, case: str | None, provider: str, records: Sequence[RunRecord]) -> ResultRow:
        """The row of ``records`` (runs of ``case``, or of every case, with ``provider``)."""
        # A run that raised has no price table of its own to say, and no steps to count.
        finished = [r for r in records if r.outcome != RAISED]
        currencies = {r.currency for r in finished}
        failures: dict[str, int] = {}
        for record in records:
            if record.failure is not None:
                failures[record.failure] = failures.get(record.failure, 0) + 1
        return cls(
            case=case,
            provider=provider,
            runs=len(records),
            passed=sum(r.passed for r in records),
            first_try=sum(r.first_try for r in records),
            median_steps=_median(r.steps for r in finished),
            tokens=sum(r.tokens for r in records),
            cost_micros=sum(r.cost_micros for r in records),
            # Runs priced in two currencies do not add up; none of them is the row's.
            currency=currencies.pop() if len(currencies) == 1 else None,
            unpriced_calls=sum(r.unpriced_calls for r in records),
            median_seconds=_median(r.seconds for r in records),
            failures=failures,
        )

    def exported(self) -> dict[str, Any]:
        """The row as JSON values, the rates and the cost (a decimal string) included."""
        cost = self.cost
        return {
            **self.model_dump(),
            "median_seconds": None
            if self.median_seconds is None
            else round(self.median_seconds, 3),
            "pass_rate": self.pass_rate,
            "first_try_rate": self.first_try_rate,
            "cost": None if cost is None else f"{cost:.6f}",
        }


class SuiteResult(BaseModel):
    """Every run of a suite, and their rows: per case and provider, and per provider."""

    model_config = ConfigDict(frozen=True)

    suite: str
    eval_id: str
    """The label ``eval=`` every run of this execution of the suite carries."""
    cases: tuple[str, ...]
    providers: tuple[str, ...]
    records: tuple[RunRecord, ...]
    """In the order the runs were planned: by repeat, then case, then provider."""

    @property
    def passed(self) -> bool:
        """Whether every run passed."""
        return all(record.passed for record in self.records)

    def rows(self) -> list[ResultRow]:
        """One row per case and provider: the cases in order, each case's providers in order."""
        return [
            ResultRow.of(case, provider, self._of(case, provider))
            for case in self.cases
            for provider in self.providers
        ]

    def totals(self) -> list[ResultRow]:
        """One row per provider over every case (``case`` is ``None``)."""
        return [
            ResultRow.of(None, provider, self._of(None, provider)) for provider in self.providers
        ]

    def _of(self, case: str | None, provider: str) -> list[RunRecord]:
        return [
            r for r in self.records if r.provider == provider and (case is None or r.case == case)
        ]

    def to_json(self) -> str:
        """The rows, the providers' totals and every run, as one JSON object."""
        return json.dumps(
            {
                "suite": self.suite,
                "eval_id": self.eval_id,
                "passed": self.passed,
                "rows": [row.exported() for row in self.rows()],
                "totals": [row.exported() for row in self.totals()],
                "runs": [record.model_dump() for record in self.records],
            },
            indent=2,
            ensure_ascii=False,
        )

    def to_csv(self) -> str:
        """The rows (one per case and provider) as CSV with a header: :data:`CSV_COLUMNS`.

        An unpriced row's ``cost`` and ``currency`` are empty; ``failures`` is
        ``why=count`` pairs joined by ``;``.
        """
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for row in self.rows():
            values = row.exported()
            values["failures"] = ";".join(f"{why}={n}" for why, n in row.failures.items())
            writer.writerow("" if values[key] is None else values[key] for key in CSV_COLUMNS)
        return out.getvalue()


def _median(values: Iterable[float]) -> float | None:
    listed = list(values)
    return float(statistics.median(listed)) if listed else None
