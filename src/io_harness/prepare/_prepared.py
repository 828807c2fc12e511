"""A run prepared to be driven, and its drive: what every way a run starts ends in.

A new run, a resume, a queued job and a sub-agent are each prepared into a
:class:`PreparedRun` (``_new.py``, ``_stored.py``, ``trees/_driver.py``) and
driven by :func:`drive`, from what the store holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from io_harness.contract import TaskContract
from io_harness.loop._deferral import Resumption
from io_harness.loop._outcome import RunResult
from io_harness.policy._gate import Gate
from io_harness.prepare._kit import RunKit
from io_harness.roles import RunRole
from io_harness.store._records import StoredRun
from io_harness.tools import RunTools
from io_harness.trees import AgentNode, Tree

__all__ = ["PreparedRun", "drive"]


@dataclass(frozen=True)
class PreparedRun:
    """Everything the loop needs to drive one agent's stored run, built in one place.

    ``kit`` is what the whole tree shares (provider, store, observer, prices,
    sandbox, compaction, the root's MCP sessions); the rest is this agent's:
    its contract, stored state, gate, tools, role and place in the tree.
    """

    kit: RunKit
    contract: TaskContract
    stored: StoredRun
    gate: Gate
    tools: RunTools
    role: RunRole | None = None
    node: AgentNode | None = None
    """Where the run sits in a sub-agent tree, when it is an agent of one."""
    tree: Tree | None = None
    """The tree the run roots, when it is a tree's root (its copies go when it ends)."""
    owns_sessions: bool = True
    """Whether the run closes the MCP sessions at its end (the root; a sub-agent's are its
    root's, offered among its tools)."""
    resumed: bool = False
    continued: bool = False
    """A run that had stopped, continued: its first record numbers on from the stopped one's."""
    resumption: Resumption = field(default_factory=Resumption)


async def drive(prepared: PreparedRun) -> RunResult:
    """Drive the prepared run to an outcome or a pause; a tree's root then removes the
    isolated copies of its children, unless it paused."""
    from io_harness.loop._engine import Engine

    result = await Engine(prepared).drive()
    tree = prepared.tree
    if tree is not None and not result.outcome.awaits:
        tree.remove_copies()
    return result
