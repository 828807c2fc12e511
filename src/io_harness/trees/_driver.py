"""What the harness does for a tree: create a spawned child's run, and drive any agent of it.

A :class:`ChildDriver` holds the kit the tree's root was opened with and
nothing of the tree: each call is given the agent it acts for. A child is
driven as a resume is, prepared from what the store holds
(:func:`~io_harness.prepare._stored.prepared_child`) and driven by the one
:func:`~io_harness.prepare.drive`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from io_harness._net import RunNet, checking
from io_harness.loop._outcome import RunResult
from io_harness.policy._gate import Gate
from io_harness.trees._containment import Containment
from io_harness.trees._ended import ended_on, stops_the_tree
from io_harness.trees._ledger import Ledger
from io_harness.trees._tree import ChildSpec, Tree

if TYPE_CHECKING:
    from io_harness.prepare._kit import RunKit
    from io_harness.trees._node import AgentNode

__all__ = ["ChildDriver", "new_tree"]


def new_tree(kit: RunKit, root_id: str, containment: Containment, started_at: float) -> Tree:
    """The tree a run roots (or a resume of it rebuilds), driven with ``kit``."""
    store = kit.store
    ledger = (
        Ledger.restored(containment, store, root_id)
        if store.tree(root_id)
        else Ledger(containment, started_at)
    )
    currency = kit.prices.currency if kit.prices is not None else ""
    return Tree(root_id, containment, ledger, store, ChildDriver(kit), currency)


@dataclass(frozen=True)
class ChildDriver:
    """The tree's driver: its children's runs, created and driven with the root's kit."""

    kit: RunKit

    def create_child(self, spec: ChildSpec, parent: AgentNode) -> None:
        """Store a spawned child's run, its parent's ``spawn`` row in the same transaction."""
        kit = self.kit
        gate = Gate(spec.policy, kit.approver, goal=spec.contract.goal, run_id=spec.run_id)
        node = parent.tree.node(spec.run_id, spec.place.depth, spec.contract, gate)
        started_at = time.time()
        tools = kit.tools(spec.contract, gate, started_at, node, sweep=False)
        kit.store.create_run(
            kit.new_run(
                spec.run_id,
                spec.contract,
                gate,
                tools,
                started_at,
                tree=spec.place,
                tree_events=(spec.spawn_row,),
            )
        )

    async def drive_child(self, run_id: str, parent: AgentNode) -> RunResult:
        """Drive the stored sub-agent ``run_id``: start it, or go on from its last commit.

        A finished child gives its stored result; one awaiting a decision that
        nobody here can give (no approver, none stored) gives its pause. A drive that
        raises ends the child with a stored outcome (``_ended.py``), unless what it
        raised stops the whole tree.
        """
        from io_harness.prepare._prepared import drive
        from io_harness.prepare._stored import prepared_child

        store = self.kit.store
        with store.lease(run_id):
            prepared = prepared_child(self.kit, parent.tree, store.load_run(run_id))
            if isinstance(prepared, RunResult):
                return prepared
            # The child's own connections are decided and recorded by its own gate.
            with checking(RunNet.of(prepared.gate, self.kit.provider)):
                try:
                    return await drive(prepared)
                except BaseException as exc:
                    ended = None if stops_the_tree(exc) else await ended_on(self.kit, run_id, exc)
                    if ended is None:
                        raise
                    return ended
