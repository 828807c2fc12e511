"""What a worker did with one queued job, and the tally it gives back when it stops."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from io_harness.loop import RunResult

__all__ = ["Drive", "DriveKind", "WorkReport"]

DriveKind = Literal["ended", "finished", "awaiting", "busy", "retried", "failed", "handed_back"]
"""What became of one job:

- ``ended``: the run was driven until it stopped (``result``): a finished
  outcome, or ``AWAITING_APPROVAL``, which takes it out of the queue until it
  is decided and queued again;
- ``finished``: the run had finished already; nothing was done (a job
  delivered twice);
- ``awaiting``: the run awaits a decision nobody has given; it leaves the
  queue until a decision queues it again;
- ``busy``: another worker drives the run; the job is tried again later;
- ``retried``: the store failed part-way (the database went away, or the
  worker lost the run's lease); the job is tried again later and the run goes
  on from its last committed step (after 20 tries it is ``failed``);
- ``failed``: the run cannot be driven here (``error`` says why: an unknown
  run, its provider cannot be built on this machine, ...); the job is done
  and the run is left as it is, for ``ioh resume`` or a requeue;
- ``handed_back``: the worker was stopped while driving it; the job is
  queued again at once for another worker.
"""


@dataclass(frozen=True)
class Drive:
    """One job a worker took: the run, what became of it, and the run's result or the error."""

    run_id: str
    kind: DriveKind
    result: RunResult | None = None
    """The run's result, when ``kind`` is ``ended``."""
    error: str | None = None
    """Why, when ``kind`` is ``failed``, ``retried`` or ``busy``."""

    def describe(self) -> str:
        """One line about it, as ``ioh worker`` prints it."""
        if self.kind == "ended" and self.result is not None:
            steps = f"{self.result.steps} step{'s' if self.result.steps != 1 else ''}"
            return f"{self.run_id}: {self.result.outcome.value} ({steps})"
        said = {
            "finished": "finished already; nothing to do",
            "awaiting": "awaits a decision; it is queued again once decided",
            "busy": "driven by another worker; tried again later",
            "retried": "the store failed; tried again later from the last committed step",
            "failed": "cannot be driven here",
            "handed_back": "handed back to the queue (this worker stopped)",
        }.get(self.kind, self.kind)
        return f"{self.run_id}: {said}" + (f": {self.error}" if self.error else "")


@dataclass(frozen=True)
class WorkReport:
    """What a worker did before it stopped: how many jobs of each :data:`DriveKind`."""

    counts: Counter[DriveKind] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        """Jobs taken, whatever became of them."""
        return sum(self.counts.values())
