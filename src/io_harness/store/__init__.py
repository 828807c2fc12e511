"""Stores: where runs live, durable step by step, and the trace operators query.

``Store.open(path)`` is a SQLite file; ``Store.memory()`` lives in memory.
"""

from io_harness.store._base import Store, Trace
from io_harness.store._records import RunSummary
from io_harness.store._sqlite import SqliteStore

__all__ = ["RunSummary", "SqliteStore", "Store", "Trace"]
