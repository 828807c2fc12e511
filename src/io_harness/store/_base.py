"""The store seam: what the loop and the CLI ask of any backend."""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from io_harness.errors import StorageError
from io_harness.policy._approval import Decision
from io_harness.store._memory import (
    DEFAULT_MEMORY_LIMITS,
    MemoryAuthor,
    MemoryEntry,
    MemoryLimits,
)
from io_harness.store._records import (
    ApprovalRow,
    McpEventRow,
    NewRun,
    RunSummary,
    StepRecord,
    StoredRun,
    TreeNode,
)
from io_harness.store._trace import MemoryTrace, Trace

if TYPE_CHECKING:
    from io_harness.store._sqlite import SqliteStore

__all__ = ["Store", "Trace"]


class Store(abc.ABC):
    """Where runs live: the durable state ``resume`` starts from, and the trace.

    Open one with :meth:`open` (a SQLite file) or :meth:`memory`. Every step
    of a run is committed in one transaction: after a crash a run holds whole
    steps only.
    """

    @staticmethod
    def open(path: str | Path, *, durability: Literal["full", "normal"] = "full") -> SqliteStore:
        """A store in the SQLite file at ``path``, created if missing.

        ``durability="full"`` (the default) syncs every commit to disk, so a
        committed step survives power loss; ``"normal"`` is faster and survives
        a crash of the process but may lose the last steps on power loss.
        """
        from io_harness.store._sqlite import SqliteStore

        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create the store's folder {path.parent}: {exc}") from None
        return SqliteStore(str(path), durability=durability)

    @staticmethod
    def memory() -> SqliteStore:
        """A store that lives as long as this object: for tests and throwaway runs."""
        from io_harness.store._sqlite import SqliteStore

        return SqliteStore(":memory:")

    @abc.abstractmethod
    def lease(self, run_id: str) -> contextlib.AbstractContextManager[None]:
        """Hold the right to drive ``run_id`` for a block.

        Only one writer drives a run at a time; another that asks while the
        lease is held gets a :class:`ResumeError` before it does anything. A
        writer that dies releases its lease.
        """

    @abc.abstractmethod
    def driven(self, run_id: str) -> bool:
        """Whether a writer holds the run's lease now: a ``running`` run nobody drives was
        interrupted (its process died), and ``resume`` continues it."""

    @abc.abstractmethod
    def create_run(self, run: NewRun) -> None:
        """Store a new run and its first messages; an id already stored is a ConfigError."""

    @abc.abstractmethod
    def load_run(self, run_id: str) -> StoredRun:
        """The run with its whole conversation; an unknown id is a ResumeError."""

    @abc.abstractmethod
    def commit_step(self, run_id: str, record: StepRecord) -> None:
        """Write one step's records, and the run's end if it has one, in one transaction.

        A step number that is not the next one (another writer advanced the
        run) is a StorageError and nothing is written.
        """

    @abc.abstractmethod
    def journal_step(self, run_id: str, step: int, progress_json: str) -> None:
        """Store the progress of step ``step`` in flight (its answer, the calls done, the call
        about to act), in its own transaction. A run that is not at ``step - 1`` (another
        writer advanced it) is a StorageError and nothing is written."""

    @abc.abstractmethod
    def append_mcp_events(self, run_id: str, step: int, rows: Sequence[McpEventRow]) -> None:
        """Add what a run's MCP servers did after its last commit (their close), on their own.

        Only trace rows: the run's state is untouched, so a finished run takes them.
        """

    @abc.abstractmethod
    def decide(self, request_id: str, decision: Decision, at: float | None = None) -> None:
        """Store the decision on a deferred action; the next resume performs it.

        ``at`` is when it was decided (Unix time; now when left out). An
        unknown request, or one decided or performed already, is a ConfigError.
        """

    @abc.abstractmethod
    def mark_performing(
        self, loaded: ApprovalRow, decision: Decision, at: float | None = None
    ) -> None:
        """Record, in its own transaction, that an approved deferred act is being performed.

        The step that performs it marks it done; a resume that finds the mark
        left by a process that died in between does not perform it again.
        ``loaded`` is the row as the resume read it: if it has changed since
        (a decision stored elsewhere), this is a StorageError.
        """

    @abc.abstractmethod
    def approvals(self, run_id: str | None = None) -> list[ApprovalRow]:
        """Deferred actions not yet performed (of one run, or of all), oldest first."""

    @abc.abstractmethod
    def runs(self, limit: int | None = None) -> list[RunSummary]:
        """Runs, newest first."""

    @abc.abstractmethod
    def trace(self, run_id: str, *, undecodable: Literal["raise", "replace"] = "raise") -> Trace:
        """Every row stored about one run; an unknown id is a ResumeError.

        Stored text that does not decode (a damaged store) is a StorageError
        naming the run and the row, unless ``undecodable="replace"`` reads its
        bad bytes as U+FFFD so the rest can be shown.
        """

    @abc.abstractmethod
    def child_run(self, parent_id: str, spawn_call: str) -> str | None:
        """The run ``parent_id``'s spawn_agent call ``spawn_call`` created, if it did."""

    @abc.abstractmethod
    def tree(self, root_id: str) -> list[TreeNode]:
        """Every agent of the tree rooted at ``root_id`` (the root first), by depth then start."""

    @abc.abstractmethod
    def tree_drawn(self, root_id: str) -> tuple[int, int]:
        """Tokens and priced cost (micro-units) the tree's committed draws add up to."""

    @abc.abstractmethod
    def memory_entries(self, workspace: str) -> list[MemoryEntry]:
        """The memory of ``workspace`` (its canonical root), oldest write first."""

    @abc.abstractmethod
    def remember(
        self,
        workspace: str,
        key: str,
        value: str,
        *,
        limits: MemoryLimits = DEFAULT_MEMORY_LIMITS,
        by: MemoryAuthor | None = None,
        at: float | None = None,
    ) -> tuple[MemoryEntry, ...]:
        """Set ``key`` in ``workspace``'s memory as its newest entry; the entries evicted.

        Past ``limits.entries`` entries or ``limits.total_chars`` characters,
        the oldest entries are evicted, oldest first, until both caps hold.
        The set and each eviction are ``memory_log`` rows (``by`` says who),
        written in the same transaction. A bad key, a relative workspace or a
        value over ``limits.value_chars`` is a ConfigError and nothing changes.
        """

    @abc.abstractmethod
    def forget(
        self, workspace: str, key: str, *, by: MemoryAuthor | None = None, at: float | None = None
    ) -> bool:
        """Remove ``key`` from ``workspace``'s memory; whether it was there (and logged)."""

    @abc.abstractmethod
    def memory_log(self, run_id: str) -> tuple[MemoryTrace, ...]:
        """Every change to memory ``run_id`` made (sets, forgets, evictions), in order."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the backend's connections."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
