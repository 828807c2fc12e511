"""A lease holder's own database session, whose advisory locks say that it is alive.

A lease row alone cannot tell a dead holder from a live one until it
expires. So its holder also holds, on a session of its own (a connection
apart from the pool, open while it holds any lease), a session-level
advisory lock named by the run and the lease's generation. PostgreSQL drops
a session's advisory locks when the session ends, which it does when its
process dies, SIGKILL included (the kernel closes the socket), or when its
connection is cut. A taker that finds a live lease row looks the lock up in
``pg_locks``: held, the holder's session is open and the lease stands; not
held, the holder is gone and the lease is taken at once, without waiting for
it to expire.

The lock is named by the generation, and taken before the row that names
that generation commits, so the lock of a lease that was taken over (an
expired one whose paused holder still has its session) never stands for the
new holder's, and a taker never sees a new lease without its lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import psycopg

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = ["LeaseSession", "holder_alive", "lease_key"]

_ALIVE = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 1)"
)
"""Whether some session holds the advisory lock whose bigint key is (high half, low half):
``pg_locks`` shows such a key's halves as ``classid`` and ``objid``, with ``objsubid`` 1."""


def lease_key(run_id: str, generation: int) -> int:
    """The advisory lock (a signed 64-bit key) that the holder of ``run_id``'s lease of
    ``generation`` holds while its session is open."""
    digest = hashlib.sha256(f"io-harness lease\0{run_id}\0{generation}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def holder_alive(conn: Connection[Any], run_id: str, generation: int) -> bool:
    """Whether the session of ``run_id``'s holder of ``generation`` is open (it holds its
    advisory lock), read with ``conn``."""
    key = lease_key(run_id, generation) & 0xFFFF_FFFF_FFFF_FFFF
    row = conn.execute(_ALIVE, (key >> 32, key & 0xFFFF_FFFF)).fetchone()
    return bool(row is not None and row[0])


class LeaseSession:
    """The connection that holds this store's leases' advisory locks.

    It is opened with the first lease and kept till :meth:`close`. Each call
    is a ``pg_try_advisory_*`` that never waits, so a take, a release and the
    heartbeat share it without holding one another up. A session cut (a
    server restart) loses its locks; :meth:`check`, called by the heartbeat,
    opens a new one and takes them again.
    """

    def __init__(self, connect: Callable[[], Connection[Any]]) -> None:
        self._connect = connect
        self._conn: Connection[Any] | None = None
        self._wanted: set[int] = set()
        self._lock = threading.Lock()

    def lock(self, key: int) -> bool:
        """Take the advisory lock ``key`` for this session; whether it was free. A session
        that cannot be opened raises the driver's error."""
        with self._lock:
            got = self._try(self._session(), key)
            if got:
                self._wanted.add(key)
            return got

    def unlock(self, key: int) -> None:
        """Let go of ``key`` (a session that is gone has let go of it already)."""
        with self._lock:
            self._wanted.discard(key)
            if self._conn is not None:
                with contextlib.suppress(psycopg.Error):
                    self._conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def check(self) -> None:
        """Make sure the session is open and holds every lock it should, opening a new one
        (and taking the locks again) when the last was cut."""
        with self._lock:
            if not self._wanted:
                return
            try:
                self._session().execute("SELECT 1")
            except psycopg.Error:
                self._drop()
                conn = self._session()  # a session that cannot be opened: next beat
                for key in list(self._wanted):
                    self._try(conn, key)  # not free: another took the lease, fenced

    def close(self) -> None:
        """Close the session, which lets go of its locks."""
        with self._lock:
            self._wanted.clear()
            self._drop()

    def _session(self) -> Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None

    @staticmethod
    def _try(conn: Connection[Any], key: int) -> bool:
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        return bool(row is not None and row[0])
