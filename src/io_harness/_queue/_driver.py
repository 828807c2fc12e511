"""pgqueuer's driver for a worker: its queries on one psycopg connection, LISTEN on another.

psycopg's ``notifies()`` holds its connection's lock while it waits, and
pgqueuer's psycopg driver waits up to a second at a time, so a worker that
listened and queried on one connection would have each of its queries (a
dequeue, a heartbeat, a job's completion) wait for that second. Apart,
neither waits: a job queued anywhere wakes the listener at once, and the
queries never queue behind it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg
    from pgqueuer.adapters.drivers.psycopg import PsycopgDriver
    from pgqueuer.ports.driver import NotifyCallback, TaskManagerPort

__all__ = ["ListeningApart"]


class ListeningApart:
    """A pgqueuer ``Driver``: queries and notifications on ``querying``, listening on
    ``listening`` (both autocommit connections the caller owns)."""

    def __init__(
        self, querying: psycopg.AsyncConnection, listening: psycopg.AsyncConnection
    ) -> None:
        from pgqueuer.adapters.drivers.psycopg import PsycopgDriver

        self._queries: PsycopgDriver = PsycopgDriver(querying)
        self._listener: PsycopgDriver = PsycopgDriver(listening)

    async def fetch(self, query: str, *args: object) -> list[dict[str, object]]:
        """Rows of ``query`` as mappings (pgqueuer's ``$1`` placeholders)."""
        return await self._queries.fetch(query, *args)

    async def execute(self, query: str, *args: object) -> str:
        """Run ``query``; its status message."""
        return await self._queries.execute(query, *args)

    async def notify(self, channel: str, payload: str) -> None:
        """Send a NOTIFY on ``channel``."""
        await self._queries.notify(channel, payload)

    async def add_listener(self, channel: str, callback: NotifyCallback) -> None:
        """Hand each NOTIFY on ``channel`` to ``callback``, from the listening connection."""
        await self._listener.add_listener(channel, callback)

    async def remove_listener(self, channel: str, callback: NotifyCallback) -> None:
        """Stop handing ``channel``'s notifications to ``callback``."""
        await self._listener.remove_listener(channel, callback)

    @property
    def shutdown(self) -> asyncio.Event:
        """Set when the driver stops (its listener's)."""
        return self._listener.shutdown

    @property
    def tm(self) -> TaskManagerPort:
        """The listener's background tasks."""
        return self._listener.tm

    async def __aenter__(self) -> ListeningApart:
        await self._listener.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._listener.__aexit__(*exc_info)
