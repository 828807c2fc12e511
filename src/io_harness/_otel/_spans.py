"""What one observer keeps while runs are open: each run's span, its open tool spans, its sums.

Times cross here as Unix seconds (the events') and leave as the nanoseconds
OpenTelemetry takes.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from opentelemetry.trace import Span, SpanContext

from io_harness.messages import Usage

REMEMBERED_STARTS = 1024
"""How many stopped runs' spans an observer remembers, for a resume to continue from."""


def nanos(seconds: float) -> int:
    """Unix seconds as the nanoseconds a span's start and end take."""
    return int(seconds * 1_000_000_000)


@dataclass
class ToolSpan:
    """A tool call's span, open from the call's start until its observation (a spawn: until
    its child has ended too)."""

    span: Span
    name: str
    children_ended: float = 0.0
    """When the last sub-agent this call spawned ended, Unix time (0: none has)."""
    stand_in: bool = False
    """Opened for a sub-agent whose spawn this drive did not make (a resumed tree's spawn is
    made again before its step goes on): it ends with the child, since no call will end it."""


@dataclass
class RunSpan:
    """A run's ``invoke_agent`` span and what it adds up while open."""

    span: Span
    run_id: str
    parent_id: str | None
    spawn_call: str | None
    tools: dict[str, ToolSpan] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    cost_micros: int = 0
    unpriced_calls: int = 0
    steps: int = 0
    verdict: str | None = None


class StoppedStarts:
    """The span of each run's last start that stopped without finishing, newest kept.

    A resume of one of these runs continues its trace from it. Bounded, so
    a service whose paused runs are never resumed does not grow without end.
    """

    def __init__(self, limit: int = REMEMBERED_STARTS) -> None:
        self.limit = limit
        self._spans: OrderedDict[str, SpanContext] = OrderedDict()

    def remember(self, run_id: str, context: SpanContext) -> None:
        """Keep ``context`` as ``run_id``'s last start."""
        self._spans[run_id] = context
        self._spans.move_to_end(run_id)
        while len(self._spans) > self.limit:
            self._spans.popitem(last=False)

    def take(self, run_id: str) -> SpanContext | None:
        """The span of ``run_id``'s last stopped start, forgotten once taken."""
        return self._spans.pop(run_id, None)
