"""Durable memory's records: an entry, the caps, who wrote, and a row of its log.

Memory is kept per workspace (its canonical root, a resolved absolute path)
and outlives runs: a later run on the same workspace starts with it. Every
way in (a run, ``ioh memory``, the ``Store`` methods) names the workspace
through :func:`memory_workspace`, so one folder has one memory however it is
written.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from io_harness._validation import CheckedModel
from io_harness.errors import ConfigError
from io_harness.store._rows import Moment

__all__ = [
    "DEFAULT_MEMORY_LIMITS",
    "KEY_MAX_CHARS",
    "MemoryAuthor",
    "MemoryEntry",
    "MemoryLimits",
    "MemoryOp",
    "memory_key_problem",
    "memory_workspace",
]

KEY_MAX_CHARS = 100
"""The longest key, in characters."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

MemoryOp = Literal["set", "forget", "evict"]
"""What a change to memory was: a key set, a key forgotten, or the oldest key evicted."""


class MemoryEntry(BaseModel):
    """One remembered note of a workspace: its key, its value, when it was last written."""

    model_config = ConfigDict(frozen=True)

    row_key: ClassVar[tuple[str, ...]] = ("key",)
    """The column that names a stored entry in an error."""

    key: str
    value: str
    updated_at: Moment
    """Unix time of the write that set the value."""


class MemoryLimits(CheckedModel):
    """The caps on one workspace's memory.

    A value longer than ``value_chars`` is refused. Past ``entries`` entries
    or ``total_chars`` characters of values in all, the oldest entries (by
    write order) are evicted until both caps hold.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    entries: int = Field(64, ge=1)
    value_chars: int = Field(2000, ge=1)
    total_chars: int = Field(16000, ge=1)

    @model_validator(mode="after")
    def _one_value_fits(self) -> MemoryLimits:
        if self.value_chars > self.total_chars:
            raise ValueError(
                f"value_chars ({self.value_chars}) must not exceed total_chars "
                f"({self.total_chars}): a value that fits must fit in all"
            )
        return self

    def describe(self) -> str:
        """The caps as the model is told them: ``64 entries, 16,000 characters``."""
        return f"{self.entries:,} entries, {self.total_chars:,} characters"


DEFAULT_MEMORY_LIMITS = MemoryLimits()
"""The caps when none are given: 64 entries, 2,000 characters a value, 16,000 in all."""


@dataclass(frozen=True, slots=True)
class MemoryAuthor:
    """Who changed memory: the run, its step and the tool call.

    Changes made from outside a run (``ioh memory forget``) have no author.
    """

    run_id: str
    step: int
    call_id: str


def memory_key_problem(key: object) -> str | None:
    """Why ``key`` cannot name a memory entry, or ``None`` when it can.

    A key is 1 to 100 characters, not all blank, with no control characters (tab and newline
    included: a key is one line of the notes block).
    """
    if not isinstance(key, str) or not key.strip():
        return "a key must not be empty or blank"
    if len(key) > KEY_MAX_CHARS:
        return f"a key is at most {KEY_MAX_CHARS} characters; this one is {len(key):,}"
    control = _CONTROL.search(key)
    if control is not None:
        return f"a key must not contain control characters; this one has {control.group()!r}"
    return None


def memory_workspace(workspace: object) -> str:
    """The one name memory keeps ``workspace``'s notes under: its canonical root, the
    absolute path with symlinks resolved, ``.`` and ``..`` gone and no trailing slash, as a
    run's root is resolved.

    ``workspace`` is an absolute path, a ``str`` or a path (``pathlib.Path``, any
    ``os.PathLike`` of text). A relative one is a :class:`ConfigError` (the store
    cannot know which folder it is relative to), as are an empty name, one holding
    NUL, and anything that is not a path.
    """
    name = os.fspath(workspace) if isinstance(workspace, os.PathLike) else workspace
    if not isinstance(name, str):
        raise ConfigError(
            f"memory's workspace must be a path (str or pathlib.Path), not "
            f"{type(workspace).__name__}"
        )
    if not name or "\x00" in name or not os.path.isabs(name):
        raise ConfigError(
            f"memory's workspace must be the absolute path of a workspace's root, not {name!r}"
        )
    try:
        return str(Path(name).resolve())
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python 3.12-)
        raise ConfigError(f"memory's workspace {name!r} cannot be resolved: {exc}") from None
