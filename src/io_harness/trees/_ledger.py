"""One tree's account in this process: agents, tokens, money, the wall clock, the slots."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from io_harness.pricing import format_money
from io_harness.store import Store
from io_harness.trees._containment import Containment, SpawnCap

__all__ = ["Ledger"]


class Ledger:
    """One tree's account, in this process: agents, tokens, money, the wall clock, the slots.

    Asyncio runs one agent's code at a time, so each draw and each check is
    atomic.
    """

    def __init__(
        self,
        containment: Containment,
        started_at: float,
        *,
        agents: int = 1,
        tokens: int = 0,
        cost_micros: int = 0,
    ) -> None:
        self.containment = containment
        self.agents = agents
        self.tokens = tokens
        self.cost_micros = cost_micros
        wall = containment.max_total_wall_seconds
        self.wall_end = started_at + wall if wall is not None else None
        self._slots = asyncio.Semaphore(containment.max_concurrent_agents)

    def admit(self) -> None:
        """Count one more agent of the tree: a child just created."""
        self.agents += 1

    @classmethod
    def restored(cls, containment: Containment, store: Store, root_id: str) -> Ledger:
        """The ledger of a stored tree: its agents, and the sum of its committed draws."""
        nodes = store.tree(root_id)
        tokens, cost = store.tree_drawn(root_id)
        started = nodes[0].run.started_at if nodes else time.time()
        return cls(containment, started, agents=max(len(nodes), 1), tokens=tokens, cost_micros=cost)

    def exhausted(self) -> SpawnCap | None:
        """The tree-wide budget that is spent, if one is."""
        c = self.containment
        if c.max_total_tokens is not None and self.tokens >= c.max_total_tokens:
            return "tokens"
        max_cost = c.max_total_cost_micros
        if max_cost is not None and self.cost_micros >= max_cost:
            return "cost"
        if self.wall_end is not None and time.time() >= self.wall_end:
            return "wall"
        return None

    def refusal(self, depth: int) -> tuple[SpawnCap, str] | None:
        """Why a child at ``depth`` may not be spawned now, naming the cap; ``None``: it may."""
        c = self.containment
        if depth > c.max_depth:
            return "depth", f"a child would be at depth {depth}, past max_depth {c.max_depth}"
        if self.agents >= c.max_total_agents:
            return "agents", (
                f"the tree holds {self.agents} agents, max_total_agents {c.max_total_agents}"
            )
        spent = self.exhausted()
        if spent == "tokens":
            return "tokens", (
                f"the tree has used {self.tokens} tokens of max_total_tokens {c.max_total_tokens}"
            )
        if spent == "cost":
            return "cost", (
                f"the tree has spent {format_money(self.cost_micros)} of max_total_cost "
                f"{c.max_total_cost}"
            )
        if spent == "wall":
            return (
                "wall",
                f"the tree's max_total_wall_seconds ({c.max_total_wall_seconds:g}) ran out",
            )
        return None

    def draw(self, tokens: int, cost_micros: int) -> dict[str, int]:
        """Take one provider call's tokens and cost; the ``draw`` row's detail."""
        self.tokens += tokens
        self.cost_micros += cost_micros
        return {
            "tokens": tokens,
            "cost_micros": cost_micros,
            "tree_tokens": self.tokens,
            "tree_cost_micros": self.cost_micros,
        }

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Run one sub-agent: wait for a free slot, hold it while the block runs."""
        async with self._slots:
            yield
