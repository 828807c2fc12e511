"""Each table's columns, the record that writes a row and the record that reads it agree.

The schema (``store/_schema.py``) is the migrations' SQL; the loop hands the
store rows as the records of ``store/_records.py``, and the store reads them
back as the records of ``store/_trace.py`` and ``store/_rows.py``, which
select their columns by field name. A column added without its fields would
be written by nobody or read by nobody; so every table of a fresh store is
checked here against both records, and every difference is listed, with
its reason, in the table's entry below.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import typing
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import BaseModel

from io_harness import Store
from io_harness.messages import Usage
from io_harness.store import (
    ApprovalTrace,
    CompactionTrace,
    EventTrace,
    McpEventTrace,
    MemoryEntry,
    MemoryTrace,
    PermissionTrace,
    ProviderCallTrace,
    SandboxEventTrace,
    StepTrace,
    ToolCallTrace,
    TreeEventTrace,
    VerificationTrace,
)
from io_harness.store._memory import MemoryAuthor
from io_harness.store._records import (
    ApprovalRow,
    CompactionRow,
    EventRow,
    Finish,
    McpEventRow,
    NewRun,
    PermissionRow,
    ProviderAttempt,
    SandboxEventRow,
    StepRecord,
    ToolCallRow,
    TreeEventRow,
    TreePlace,
    VerificationRow,
)
from io_harness.store._rows import MessageRecord, RunRecord


@dataclass(frozen=True)
class Table:
    """One table: who writes its rows, who reads them, and the columns each leaves out."""

    name: str
    writers: tuple[type, ...]
    """The records whose fields are the columns of a written row (none: it is written from
    plain values)."""
    not_written: frozenset[str]
    """Columns no writer's field holds: the commit supplies them (whose run, which step,
    the row's place)."""
    reader: type[BaseModel]
    """The record a row is read as; it selects its columns by its fields' names."""
    not_read: frozenset[str] = frozenset()
    """Columns the reader leaves out."""
    shared: bool = False
    """Whether a writer holds more than this table's columns (a step's whole record), so
    only the columns it holds are checked, not that each of its fields is a column."""


RUN = frozenset({"run_id"})
"""A trace's rows are all its run's: the commit names the run, and the reader leaves it out."""

TABLES = (
    Table(
        "runs",
        (NewRun, Finish),
        # What each step's commit counts and keeps (StepRecord): the status, the totals,
        # the rules an approver remembered, the answer of the step in flight.
        frozenset({"status", "steps", *Usage.model_fields, "cost_micros", "unpriced_calls"})
        | {"remembered", "journal"},
        RunRecord,
        shared=True,  # a new run holds its first messages and events too
    ),
    Table(
        "messages",
        (),  # the body is the canonical Message's JSON, written beside its place and step
        frozenset({"run_id", "seq", "step", "role", "body"}),
        MessageRecord,
        # The body holds the role; the step is for SQL readers (a message's step is told
        # by its place, as store/_by_step.py says).
        RUN | {"step", "role"},
    ),
    Table(
        "steps",
        (StepRecord,),
        RUN | {"cost_micros"},  # the step's model calls' cost: StepRecord.step_cost_micros
        StepTrace,
        RUN,
        shared=True,
    ),
    Table("provider_calls", (ProviderAttempt,), RUN | {"step"}, ProviderCallTrace, RUN),
    Table("tool_calls", (ToolCallRow,), RUN | {"step", "seq"}, ToolCallTrace, RUN),
    Table("verifications", (VerificationRow,), RUN | {"step", "seq"}, VerificationTrace, RUN),
    Table("events", (EventRow,), RUN | {"seq"}, EventTrace, RUN),
    Table("permissions", (PermissionRow,), RUN | {"step", "seq"}, PermissionTrace, RUN),
    Table("approvals", (ApprovalRow,), frozenset(), ApprovalTrace, RUN),
    Table("sandbox_events", (SandboxEventRow,), RUN | {"step", "seq"}, SandboxEventTrace, RUN),
    Table(
        "memory",
        (),  # written from a workspace, a key and a value (store/_memory_sql.py)
        frozenset({"workspace", "key", "value", "written", "updated_at"}),
        MemoryEntry,
        # A workspace's entries are read by their workspace, in the order of their writes.
        frozenset({"workspace", "written"}),
    ),
    Table(
        "memory_log",
        (MemoryAuthor,),
        # The change itself, from the memory tool's arguments; seq is the store's count.
        frozenset({"seq", "workspace", "key", "op", "value", "at"}),
        MemoryTrace,
        RUN,
    ),
    Table("mcp_events", (McpEventRow,), RUN | {"step", "seq"}, McpEventTrace, RUN),
    Table(
        "tree_events",
        (TreeEventRow,),
        RUN | {"root_id", "step", "seq"},
        TreeEventTrace,
        RUN | {"root_id"},  # read by the run they are of; the root names the tree
    ),
    Table("compactions", (CompactionRow,), RUN | {"seq"}, CompactionTrace, RUN),
)


def columns_of_a_fresh_store(path: Path) -> dict[str, set[str]]:
    """Each table of a store just made at the current version, and its columns."""
    Store.open(path).close()
    with sqlite3.connect(path) as db:
        names = [
            name
            for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        return {name: {c[1] for c in db.execute(f"PRAGMA table_info({name})")} for name in names}


def written_columns(record: type) -> set[str]:
    """The columns a writer record's fields hold: ``x_json`` is column ``x``; a Usage or a
    TreePlace field holds its own fields' columns."""
    hints = typing.get_type_hints(record)
    held: set[str] = set()
    for field in dataclasses.fields(record):
        annotation = hints[field.name]
        if _holds(annotation, Usage):
            held |= set(Usage.model_fields)
        elif _holds(annotation, TreePlace):
            held |= written_columns(TreePlace)
        else:
            held.add(field.name.removesuffix("_json"))
    return held


def _holds(annotation: object, kind: type) -> bool:
    return annotation is kind or kind in typing.get_args(annotation)


def read_disagreements(table: Table, columns: set[str]) -> set[str]:
    """Where the reader and the columns disagree beyond the listed differences: columns it
    leaves out unlisted (or listed and read), and fields that are no column."""
    fields = set(table.reader.model_fields)
    return ((columns - fields) ^ table.not_read) | (fields - columns)


def write_disagreements(table: Table, columns: set[str]) -> set[str]:
    """Where the writers and the columns disagree beyond the listed differences."""
    written = set().union(*(written_columns(writer) for writer in table.writers))
    extra = set() if table.shared else written - columns
    return ((columns - written) ^ table.not_written) | extra


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    return columns_of_a_fresh_store(tmp_path_factory.mktemp("schema") / "runs.db")


def test_every_table_of_the_schema_is_listed_here(schema: dict[str, set[str]]) -> None:
    assert sorted(schema) == sorted(table.name for table in TABLES)


@pytest.mark.parametrize("table", TABLES, ids=lambda table: table.name)
def test_a_tables_columns_are_its_readers_fields_but_those_listed(
    schema: dict[str, set[str]], table: Table
) -> None:
    assert read_disagreements(table, schema[table.name]) == set()


@pytest.mark.parametrize("table", TABLES, ids=lambda table: table.name)
def test_a_tables_columns_are_its_writers_fields_but_those_listed(
    schema: dict[str, set[str]], table: Table
) -> None:
    assert write_disagreements(table, schema[table.name]) == set()


@pytest.mark.parametrize("table", TABLES, ids=lambda table: table.name)
def test_a_column_added_without_its_fields_is_a_disagreement(
    schema: dict[str, set[str]], table: Table
) -> None:
    columns = schema[table.name] | {"added_later"}

    assert read_disagreements(table, columns) == {"added_later"}
    assert write_disagreements(table, columns) == {"added_later"}
