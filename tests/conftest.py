"""Shared fixtures: a small workspace on disk and a file store per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from io_harness import Store


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A workspace with a module, its test and a nested data file."""
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "data").mkdir()
    (root / "data" / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    return root


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A SQLite store in a real file, closed after the test."""
    opened = Store.open(tmp_path / "runs.db")
    yield opened
    opened.close()


# A throw-away PostgreSQL server (session) and a fresh database per test: see tests/_postgres.py.
from _postgres import postgres_cluster, postgres_url  # noqa: E402, F401

# The store conformance suite runs a test on each backend: see tests/_stores.py.
from _stores import store_factory  # noqa: E402, F401
