"""What a report reads from a store: the run's trace, and every agent below it in its tree.

Only the store's public API is used (``trace``, ``load_run``, ``tree``,
``tree_drawn``, ``driven``, ``approvals``), so a report can be made from any
backend. A damaged store still gives what it can: a trace whose text does not
decode is read again with the bad bytes replaced, and the report says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from io_harness.errors import ConfigError, StorageError
from io_harness.pricing import PriceTable
from io_harness.store import Store, Trace, TreeNode
from io_harness.store._records import StoredRun

__all__ = ["Agent", "Gathered", "gather"]


@dataclass(frozen=True, slots=True)
class Agent:
    """One run of the report: its trace and what the store keeps beside it."""

    trace: Trace
    status: str
    """The run's status as ``ioh show`` says it (``interrupted`` when nobody drives it)."""
    currency: str | None
    """Its price table's currency; ``None``: it has none (its spend is unpriced)."""
    stored: StoredRun | None
    """The stored run (contract, system prompt, tools, error); ``None``: it could not be read."""
    damaged: str | None
    """Why part of its trace was read with bad bytes replaced; ``None``: it was not."""
    node: TreeNode | None
    """Its place in a sub-agent tree; ``None``: it is in none."""


@dataclass(frozen=True, slots=True)
class Gathered:
    """The report's runs: the one asked for first, then the agents of its subtree."""

    agents: tuple[Agent, ...]
    root_id: str | None
    """The root of the tree the run is in; ``None``: it is in no tree."""
    drawn: tuple[int, int] | None
    """The tree's ledger (tokens, cost) when the run is the tree's root."""

    @property
    def is_tree(self) -> bool:
        """Whether the report shows more than one agent's run, or an agent of a tree."""
        return self.root_id is not None


def gather(store: Store, run_id: str) -> Gathered:
    """Read ``run_id`` and its sub-agents; an unknown id is the store's ResumeError."""
    trace, damaged = read_trace(store, run_id)
    stored = _stored(store, run_id)
    place = stored.tree if stored is not None else None
    root_id = place.root_id if place is not None else run_id
    nodes = _subtree(store.tree(root_id), run_id)
    first = _agent(store, trace, damaged, stored, nodes[0] if nodes else None)
    agents = [first]
    for node in nodes[1:]:
        child_trace, child_damaged = read_trace(store, node.run.id)
        agents.append(_agent(store, child_trace, child_damaged, _stored(store, node.run.id), node))
    in_tree = bool(nodes)
    drawn = store.tree_drawn(root_id) if in_tree and root_id == run_id else None
    return Gathered(tuple(agents), root_id if in_tree else None, drawn)


def read_trace(store: Store, run_id: str) -> tuple[Trace, str | None]:
    """The run's trace, and why it was read leniently (``None``: it was not).

    Stored text that does not decode is read again with its bad bytes as
    U+FFFD, as ``ioh show`` does; a row that still does not load is that
    read's StorageError.
    """
    try:
        return store.trace(run_id), None
    except StorageError as exc:
        return store.trace(run_id, undecodable="replace"), str(exc)


def _stored(store: Store, run_id: str) -> StoredRun | None:
    try:
        return store.load_run(run_id)
    except StorageError:  # damaged: the trace read leniently is what there is
        return None


def _subtree(nodes: list[TreeNode], run_id: str) -> list[TreeNode]:
    """``run_id``'s node and its descendants, each after its parent (``[]``: not in a tree)."""
    children: dict[str | None, list[TreeNode]] = {}
    for node in nodes:
        children.setdefault(node.parent_id, []).append(node)
    found = [node for node in nodes if node.run.id == run_id]
    ordered: list[TreeNode] = []
    while found:
        node = found.pop(0)
        ordered.append(node)
        found[:0] = children.get(node.run.id, [])
    return ordered


def _agent(
    store: Store,
    trace: Trace,
    damaged: str | None,
    stored: StoredRun | None,
    node: TreeNode | None,
) -> Agent:
    return Agent(
        trace=trace,
        status=store.status_now(trace.run),
        currency=_currency(stored),
        stored=stored,
        damaged=damaged,
        node=node,
    )


def _currency(stored: StoredRun | None) -> str | None:
    if stored is None or stored.prices_json is None:
        return None
    try:
        return PriceTable.from_json(stored.prices_json).currency
    except ConfigError:
        return ""  # priced, in a currency this version cannot read
