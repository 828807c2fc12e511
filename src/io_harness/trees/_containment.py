"""What a whole tree of agents may use: the :class:`Containment` a harness is given."""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import ConfigDict, Field, field_validator

from io_harness._validation import CheckedModel

__all__ = ["SPAWN_TOOL", "Containment", "SpawnCap"]

SPAWN_TOOL = "spawn_agent"
SpawnCap = Literal["depth", "agents", "tokens", "cost", "wall"]
"""The cap that refused a spawn, as the observation and the ``refuse`` row name it."""


class Containment(CheckedModel):
    """What a whole tree of agents may use, however its agents' contracts are written.

    Given as ``Harness(containment=...)``: every agent is then offered
    ``spawn_agent``. ``max_depth`` is how deep the tree may grow (the root is
    depth 0; 1 lets the root spawn children but not grandchildren);
    ``max_total_agents`` counts every agent of the tree, the root included;
    ``max_concurrent_agents`` is how many sub-agents run at once, tree-wide.
    ``max_total_tokens``, ``max_total_cost`` (in the run's price table's
    currency) and ``max_total_wall_seconds`` (from the root's start) bound
    the tree as a whole: every provider call of every agent draws on them,
    an agent past one ends with the matching budget outcome, and a spawn
    past one is refused.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_depth: int = Field(2, ge=1)
    max_total_agents: int = Field(10, ge=1)
    max_concurrent_agents: int = Field(4, ge=1)
    max_total_tokens: int | None = Field(None, ge=1)
    max_total_cost: Decimal | None = Field(None, gt=0)
    max_total_wall_seconds: float | None = Field(None, gt=0)

    @field_validator("max_total_cost", mode="before")
    @classmethod
    def _exact(cls, value: object) -> object:
        return Decimal(repr(value)) if isinstance(value, float) else value

    @property
    def max_total_cost_micros(self) -> int | None:
        """``max_total_cost`` in micro-units, rounded down."""
        if self.max_total_cost is None:
            return None
        return int(self.max_total_cost * 1_000_000)
