"""What a run's MCP servers did, as records the harness drains into the trace."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["McpEvent", "McpEventKind"]

McpEventKind = Literal["start", "handshake", "list", "call", "restart", "net", "undone", "close"]


@dataclass(frozen=True, slots=True)
class McpEvent:
    """One thing one MCP server did; ``detail`` is plain JSON.

    - ``start``: the server was started or reached (``transport``, ``target``,
      ``sandbox``: the backend it runs in when it asked for one; ``ok`` false with
      ``error`` when it could not be).
    - ``handshake``: it answered (``server`` name and ``version``, ``protocol``,
      ``seconds``), or did not (``ok`` false, ``error``).
    - ``list``: its tools were listed (``tools``: how many, ``reason``: ``start``,
      ``restart`` or ``changed``; ``added``, ``removed`` and ``left_out`` (a name
      that cannot be offered, with why) when there are any; ``ok`` false on failure).
    - ``call``: one tool call (``tool``, ``seconds``, ``outcome``: ``ok``,
      ``error`` (the tool said so), ``timeout``, ``died``, ``gone``, ``failed``,
      ``closed`` (a call after the end);
      ``chars`` shown and ``cut`` when the result was over the cap).
    - ``restart``: the server had stopped and was started again (``reason``,
      ``ok``), or will not be (``ok`` false).
    - ``net``: a sandboxed server asked its proxy for a connection (``target``
      ``host:port``, ``allowed``: the run's policy let it through).
    - ``undone``: a sandboxed server, once stopped, had changed files that run code
      later (``undone``: what the harness undid, one line each).
    - ``close``: its session ended (``seconds``; ``error`` when closing failed).
    """

    kind: McpEventKind
    server: str
    detail: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)
