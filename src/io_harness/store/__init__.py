"""Stores: where runs live, durable step by step, and the trace operators query.

``Store.open(path)`` is a SQLite file, ``Store.open("postgresql://...")`` a
PostgreSQL database (many workers, leases enforced in the database);
``Store.memory()`` lives in memory. Both backends run the same SQL
(``_sql_store`` and the ``_*_sql`` helpers).
"""

from io_harness.store._base import Store
from io_harness.store._memory import MemoryAuthor, MemoryEntry, MemoryLimits
from io_harness.store._records import RunSummary, TreeNode
from io_harness.store._sqlite import SqliteStore
from io_harness.store._trace import (
    ApprovalTrace,
    CompactionTrace,
    EventTrace,
    McpEventTrace,
    MemoryTrace,
    PermissionTrace,
    ProviderCallTrace,
    SandboxChoiceTrace,
    SandboxEventTrace,
    StepTrace,
    ToolCallTrace,
    Trace,
    TreeEventTrace,
    VerificationTrace,
)

__all__ = [
    "ApprovalTrace",
    "CompactionTrace",
    "EventTrace",
    "McpEventTrace",
    "MemoryAuthor",
    "MemoryEntry",
    "MemoryLimits",
    "MemoryTrace",
    "PermissionTrace",
    "ProviderCallTrace",
    "RunSummary",
    "SandboxChoiceTrace",
    "SandboxEventTrace",
    "SqliteStore",
    "StepTrace",
    "Store",
    "ToolCallTrace",
    "Trace",
    "TreeEventTrace",
    "TreeNode",
    "VerificationTrace",
]
