"""What every agent of one tree shares, and what the harness does for it (the driver)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from io_harness.contract import TaskContract
from io_harness.loop._outcome import RunResult
from io_harness.policy._gate import Gate
from io_harness.policy._policy import Policy
from io_harness.store import Store
from io_harness.store._records import TreeEventRow, TreePlace
from io_harness.trees._containment import Containment
from io_harness.trees._ledger import Ledger

if TYPE_CHECKING:
    from io_harness.trees._node import AgentNode

__all__ = ["COPY_PREFIX", "ChildSpec", "Tree", "TreeDriver"]

COPY_PREFIX = "ioh-isolated-"
"""The start of the name of an isolated child's private folder, which holds its copy."""


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """A child to create: its id, contract, policy and place; its parent's ``spawn`` row."""

    run_id: str
    contract: TaskContract
    policy: Policy
    place: TreePlace
    spawn_row: TreeEventRow


class TreeDriver(Protocol):
    """What the harness does for a tree: create a child run, and drive any agent of it."""

    def create_child(self, spec: ChildSpec, parent: AgentNode) -> None:
        """Store the child ``parent`` spawned, its ``spawn`` row with it."""
        ...

    async def drive_child(self, run_id: str, parent: AgentNode) -> RunResult:
        """Drive the stored agent ``run_id`` (new or part-done) to an outcome or a pause."""
        ...


@dataclass
class Tree:
    """What every agent of one tree shares in this process."""

    root_id: str
    containment: Containment
    ledger: Ledger
    store: Store
    driver: TreeDriver
    currency: str = ""
    """The price table's currency, for the spend in a child's report."""
    copies: list[Path] = field(default_factory=list)
    """Isolated copies made for children, removed when the tree ends."""

    def node(self, run_id: str, depth: int, contract: TaskContract, gate: Gate) -> AgentNode:
        """The agent ``run_id`` as its engine sees the tree."""
        from io_harness.trees._node import AgentNode

        return AgentNode(self, run_id, depth, contract, gate)

    def remove_copies(self) -> None:
        """Remove the isolated copies of finished children (a conflict's copy is kept)."""
        for copy in self.copies:
            # The copy's own private folder goes with it (an older run's copy sat in /tmp).
            holder = copy.parent if copy.parent.name.startswith(COPY_PREFIX) else copy
            shutil.rmtree(holder, ignore_errors=True)
        self.copies.clear()
