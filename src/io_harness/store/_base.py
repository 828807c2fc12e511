"""The store seam: what the loop and the CLI ask of any backend."""

from __future__ import annotations

import abc
import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from io_harness._urls import looks_like_connection_string, without_password
from io_harness.errors import ConfigError
from io_harness.messages import Message
from io_harness.policy._approval import Decision
from io_harness.store._memory import (
    DEFAULT_MEMORY_LIMITS,
    MemoryAuthor,
    MemoryEntry,
    MemoryLimits,
)
from io_harness.store._records import (
    ApprovalRow,
    EventRow,
    McpEventRow,
    NewRun,
    RunSummary,
    StepRecord,
    StoredRun,
    TreeNode,
)
from io_harness.store._trace import MemoryTrace, Trace

__all__ = ["POSTGRES_SCHEMES", "Store", "Trace"]

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""How a location names a PostgreSQL database rather than a SQLite file."""


class Store(abc.ABC):
    """Where runs live: the durable state ``resume`` starts from, and the trace.

    Open one with :meth:`open` (a SQLite file, or a PostgreSQL database for
    many workers) or :meth:`memory`. Every step of a run is committed in one
    transaction: after a crash a run holds whole steps only.
    """

    @staticmethod
    def open(
        location: str | Path,
        *,
        durability: Literal["full", "normal"] = "full",
        lease_seconds: float = 30.0,
        heartbeat_seconds: float | None = None,
    ) -> Store:
        """The store at ``location``: a PostgreSQL database or a SQLite file.

        A ``postgresql://`` (or ``postgres://``) URL opens that database with a
        pool of connections, creating the store's tables when it has none;
        anything else is the path of a SQLite file, created if missing (with the
        folders leading to it), its files ``0600`` and folders ``0700``; a symlink
        where it keeps a file, or one another user made on the way to it, is a
        :class:`StorageError`. Any other URL, or a libpq ``key=value``
        connection string, is a :class:`ConfigError`.

        ``durability="full"`` (the default) makes every commit durable before it
        returns (SQLite syncs it to disk; PostgreSQL waits for its WAL flush);
        ``"normal"`` is faster and survives a crash of this process but may lose
        the last steps when the machine (or the database server) loses power.

        ``lease_seconds`` and ``heartbeat_seconds`` (PostgreSQL only) time a
        run's lease: its holder renews it every ``heartbeat_seconds`` (a third of
        ``lease_seconds`` when left out), and a holder that has not renewed it for
        ``lease_seconds`` (dead, paused, cut off) has lost it. A SQLite lease is
        an ``flock`` the kernel drops when its holder dies, so it needs neither.
        """
        if isinstance(location, str) and location.startswith(POSTGRES_SCHEMES):
            try:
                from io_harness.store._postgres import PostgresStore
            except ImportError as exc:  # psycopg or its pool is not installed
                raise ConfigError(
                    f"a PostgreSQL store needs the postgres extra ({exc.name} is not "
                    "installed): pip install 'io-harness[postgres]'"
                ) from None

            return PostgresStore(
                location,
                durability=durability,
                lease_seconds=lease_seconds,
                heartbeat_seconds=heartbeat_seconds,
            )
        if isinstance(location, str) and (
            "://" in location or looks_like_connection_string(location)
        ):
            # Never taken for a file's name: it would be made, credentials and all.
            raise ConfigError(
                f"the store {without_password(location)} is neither a SQLite file's path nor a "
                "postgresql:// URL (for a file of that name, start it with ./)"
            )
        from io_harness.store._sqlite import SqliteStore

        return SqliteStore(str(location), durability=durability)

    @staticmethod
    def memory() -> Store:
        """A store that lives as long as this object: for tests and throwaway runs."""
        from io_harness.store._sqlite import SqliteStore

        return SqliteStore(":memory:")

    @abc.abstractmethod
    def lease(self, run_id: str) -> contextlib.AbstractContextManager[None]:
        """Hold the right to drive ``run_id`` for a block.

        Only one writer drives a run at a time; another that asks while the
        lease is held gets a :class:`ResumeError` before it does anything (on
        PostgreSQL naming the holder and when its lease expires). A writer that
        dies releases its lease (PostgreSQL: when the server ends its session, or
        else when the lease expires).
        Every write of the run's state checks, in its own transaction, that
        the lease it is made under is still held: a writer that lost it (its
        lease expired while it was paused or cut off, and another took the
        run) writes nothing more and gets a :class:`StorageError`.
        """

    @abc.abstractmethod
    def driven(self, run_id: str) -> bool:
        """Whether a writer holds the run's lease now (any process, any machine; on
        PostgreSQL an unexpired lease whose holder's session is open): a ``running`` run
        nobody drives was interrupted (its writer died), and ``resume`` continues it."""

    @abc.abstractmethod
    def create_run(self, run: NewRun) -> None:
        """Store a new run and its first messages; an id already stored is a ConfigError."""

    @abc.abstractmethod
    def restart_clock(self, run_id: str, label: str, at: float | None = None) -> bool:
        """Stamp the run's start ``at`` (now when left out) and drop its label ``label``, if it
        has that label; whether it had. Under the run's lease.

        A queued run carries such a label until it is first driven, so that its
        wall-time budget counts from then, not from its time in the queue.
        """

    @abc.abstractmethod
    def continue_run(
        self, run_id: str, contract_json: str, said: Message | None, event: EventRow
    ) -> None:
        """Make a run that stopped without success go on, under the run's lease, in one
        transaction: running again under ``contract_json`` (its new budget), ``said`` a
        user turn after its last step, ``event`` its continuation; outcome and end cleared.

        A run that is not finished, or that succeeded, is a ResumeError.
        """

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
    def runs(
        self,
        limit: int | None = None,
        *,
        labels: Mapping[str, str] | None = None,
        status: str | None = None,
    ) -> list[RunSummary]:
        """Runs, newest first: at most ``limit`` of them, filtered in the database.

        ``labels`` keeps the runs that carry every one of these labels with
        these values. ``status`` keeps the runs whose stored status
        (``running``, ``awaiting``, ``finished``) or outcome (``success``,
        ``step_cap_reached``, ...) is this word. ``interrupted`` is not
        stored: it is a ``running`` run that :meth:`driven` says nobody drives.
        """

    @abc.abstractmethod
    def trace(self, run_id: str, *, undecodable: Literal["raise", "replace"] = "raise") -> Trace:
        """Every row stored about one run; an unknown id is a ResumeError.

        Stored text that does not decode (a damaged store) is a StorageError
        naming the run and the row, unless ``undecodable="replace"`` reads its
        bad bytes as U+FFFD so the rest can be shown.
        """

    def status_now(self, run: RunSummary) -> str:
        """``run``'s status as a person should read it: a stored ``running`` run that no
        writer drives is ``interrupted`` (its process died; ``resume`` continues it), or
        ``awaiting`` when it is an agent of a tree paused for a sub-agent's decision."""
        if run.status != "running" or self.driven(run.id):
            return run.status
        place = self.load_run(run.id).tree
        if place is not None and any(self.approvals(n.run.id) for n in self.tree(place.root_id)):
            return "awaiting"
        return "interrupted"

    def root_of(self, run_id: str) -> str:
        """The run a resume of ``run_id`` starts from: its sub-agent tree's root, or itself
        (a tree resumes from its root, which holds what a resume needs); an unknown id is
        a ResumeError."""
        place = self.load_run(run_id).tree
        return place.root_id if place is not None else run_id

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
    def memory_entries(self, workspace: str | os.PathLike[str]) -> list[MemoryEntry]:
        """The memory of ``workspace``, oldest write first.

        ``workspace`` is an absolute path (a ``str`` or a ``pathlib.Path``), named
        as memory names it in every method (:meth:`remember`, :meth:`forget`, a
        run's tools, ``ioh memory``): its canonical root, with symlinks resolved,
        ``.`` and ``..`` gone and no trailing slash. A relative path, or a name
        that is not a path, is a ConfigError.
        """

    @abc.abstractmethod
    def remember(
        self,
        workspace: str | os.PathLike[str],
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
        written in the same transaction. ``workspace`` is named as
        :meth:`memory_entries` says. A bad key or workspace, or a value over
        ``limits.value_chars``, is a ConfigError and nothing changes.
        """

    @abc.abstractmethod
    def forget(
        self,
        workspace: str | os.PathLike[str],
        key: str,
        *,
        by: MemoryAuthor | None = None,
        at: float | None = None,
    ) -> bool:
        """Remove ``key`` from ``workspace``'s memory (named as :meth:`memory_entries`
        says); whether it was there (and logged)."""

    @abc.abstractmethod
    def memory_log(self, run_id: str) -> tuple[MemoryTrace, ...]:
        """Every change to memory ``run_id`` made (sets, forgets, evictions), in order."""

    @property
    def read_only(self) -> bool:
        """Whether this store can only be read: a SQLite file on a read-only filesystem, or
        one this user may not write. It reads as any store; a write (a lease, a step, a
        decision, a note) is a :class:`StorageError` that says the store is read-only."""
        return False

    def files(self) -> tuple[Path, ...]:
        """The files and folders on this machine that hold the store: a SQLite file's
        database, its WAL, shared memory and journal, and its leases folder; none for
        PostgreSQL or a store in memory.

        A run's agent may neither read nor write them, wherever they lie: a
        workspace that holds them hides them from its tools and commands.
        """
        return ()

    @abc.abstractmethod
    def close(self) -> None:
        """Release the backend's connections."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
