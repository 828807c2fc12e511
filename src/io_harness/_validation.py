"""Turning pydantic validation errors into one line that names each key."""

from __future__ import annotations

from pydantic import ValidationError

__all__ = ["describe_validation"]


def describe_validation(exc: ValidationError, *, top: str = "(top level)") -> str:
    """Each problem as ``key.path: message``, joined with ``; ``."""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or top
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)
