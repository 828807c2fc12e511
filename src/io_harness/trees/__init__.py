"""Sub-agent trees: the containment a tree lives within, its one ledger, and ``spawn_agent``.

A harness given a :class:`Containment` offers every agent of its runs the
``spawn_agent`` tool. Each agent is a run in the store; a child names its
parent, its depth and the spawn call, and works in its parent's workspace
(or a private copy of it, ``_isolate.py``) under its parent's policy
narrowed further (``_child.py``). Every provider call of every agent draws
on the tree's :class:`Ledger`, whose draws are committed with the calls they
paid for: a resumed tree's ledger is the sum of its committed draws. Each
agent's :class:`AgentNode` (``_node.py``) holds its spawns in flight; what
a parent reads of a child is ``_report.py``'s; the :class:`Tree` holds
what every agent shares, and its driver (``_driver.py``) creates and drives
the children's runs.
"""

from io_harness.trees._containment import SPAWN_TOOL, Containment, SpawnCap
from io_harness.trees._driver import ChildDriver, new_tree
from io_harness.trees._ledger import Ledger
from io_harness.trees._node import AgentNode
from io_harness.trees._spawn import SpawnArgs, SpawnTool
from io_harness.trees._tree import ChildSpec, Tree, TreeDriver

__all__ = [
    "SPAWN_TOOL",
    "AgentNode",
    "ChildDriver",
    "ChildSpec",
    "Containment",
    "Ledger",
    "SpawnArgs",
    "SpawnCap",
    "SpawnTool",
    "Tree",
    "TreeDriver",
    "new_tree",
]
