"""Verification: deterministic criteria the harness runs, never the model.

A run succeeds only when its contract's criterion passes. Each criterion is a
pydantic model (stored with the run, tagged by ``kind``), renders the sentence
the model is shown as its success condition, and checks the subject.
"""

from io_harness.verify._base import CriterionBase, Mode, Subject, VerificationResult
from io_harness.verify._criteria import (
    AllOf,
    AnyOf,
    Command,
    Criterion,
    FileContains,
    FileEquals,
    PythonCompiles,
    WorkspaceFileContains,
)
from io_harness.verify._pytest import PytestPasses

__all__ = [
    "AllOf",
    "AnyOf",
    "Command",
    "Criterion",
    "CriterionBase",
    "FileContains",
    "FileEquals",
    "Mode",
    "PytestPasses",
    "PythonCompiles",
    "Subject",
    "VerificationResult",
    "WorkspaceFileContains",
]
