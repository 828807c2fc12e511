"""PostgreSQL leases: who drives a run, until when, and the generation that fences it.

A run's lease is a row of ``leases``: its holder, a generation and an expiry
on the database's clock. A holder renews its leases from a heartbeat thread;
one that stops renewing (it died, was paused, or lost the database) has lost
the lease once the expiry passes, and the next writer to take the run bumps
the generation. Every write of a run's state runs :meth:`PostgresLeases.fence`
in its own transaction: the write commits only while the lease it is made
under is the run's current one (same holder, same generation, not expired),
and the check locks the lease row until that transaction ends, so a takeover
waits for it or makes it fail. A writer that lost its lease therefore never
commits again, whatever it was doing when it lost it.

A holder that died is told from a live one by its session (``_pg_session``):
a live lease row whose holder's session is gone is taken at once, and one
whose holder's session is open is refused with the holder's name and the
lease's expiry.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from io_harness.errors import ResumeError, StorageError
from io_harness.store._pg_session import LeaseSession, holder_alive, lease_key
from io_harness.store._sql import SqlConnection

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

__all__ = ["LEASES_TABLE", "PostgresLeases"]

LEASES_TABLE = """
-- Who drives each run. A holder renews its expiry (the database's clock) while it lives;
-- a writer that takes an expired lease bumps the generation, which fences the one before.
CREATE TABLE leases (
    run_id     TEXT PRIMARY KEY,
    holder     TEXT,                             -- host:pid:token of the writer; NULL: released
    generation BIGINT NOT NULL,                  -- 1 for the run's first holder, +1 each taker
    taken_at   TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
"""


_RUNNING = " wait for it to stop, or stop it, before resuming"


def _held_here(run_id: str, holder: str) -> ResumeError:
    return ResumeError(
        f"run {run_id!r} is being driven by another writer: this process, through this "
        f"store ({holder});{_RUNNING}"
    )


def _held_alive(run_id: str, holder: str, expires: datetime, left: float) -> ResumeError:
    until = expires.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return ResumeError(
        f"run {run_id!r} is being driven by another writer, {holder} (host:pid:token), "
        f"whose database session is open; its lease runs to {until} (in {max(left, 0):.0f} s) "
        f"and is renewed while it lives:{_RUNNING}"
    )


def _held_meanwhile(run_id: str) -> ResumeError:
    return ResumeError(f"run {run_id!r} was taken by another writer a moment ago:{_RUNNING}")


class PostgresLeases:
    """The leases one store object holds, and the heartbeat that renews them.

    ``connect`` opens the holder's own session (``_pg_session``), apart from
    ``pool``: one more connection while this object holds a lease.
    """

    def __init__(
        self,
        pool: ConnectionPool[Connection[Any]],
        connect: Callable[[], Connection[Any]],
        *,
        seconds: float,
        heartbeat: float,
    ) -> None:
        self._pool = pool
        self._session = LeaseSession(connect)
        self.seconds = seconds
        self.heartbeat = heartbeat
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beating: threading.Thread | None = None

    @contextlib.contextmanager
    def hold(self, run_id: str) -> Iterator[None]:
        """Take the run's lease for the block; refuse if a live holder has it."""
        with self._lock:
            if run_id in self._held:
                raise _held_here(run_id, self.holder)
            self._held[run_id] = 0  # taken below; a write before that is fenced out
        try:
            generation = self._take(run_id)
        except BaseException:
            with self._lock:
                del self._held[run_id]
            raise
        with self._lock:
            self._held[run_id] = generation
        self._start_heartbeat()
        try:
            yield
        finally:
            with self._lock:
                del self._held[run_id]
            self._release(run_id, generation)
            self._session.unlock(lease_key(run_id, generation))

    def _take(self, run_id: str) -> int:
        """Take the lease in one transaction: free, expired, or its holder's session gone.

        The row is locked while this decides, so takers go one at a time; the
        new generation's advisory lock is taken before the row naming it
        commits, and let go again if the row is not written.
        """
        locked: list[int] = []
        try:
            with self._pool.connection() as conn, conn.transaction():
                found = conn.execute(
                    "SELECT holder, generation, expires_at, extract(epoch FROM expires_at"
                    " - clock_timestamp())::float8 FROM leases WHERE run_id = %s FOR UPDATE",
                    (run_id,),
                ).fetchone()
                generation = 1 if found is None else int(found[1]) + 1
                if found is not None and found[0] is not None and found[3] > 0:  # a live row
                    holder, current, expires, left = found
                    if holder_alive(conn, run_id, int(current)):
                        raise _held_alive(run_id, holder, expires, left)
                key = lease_key(run_id, generation)
                if not self._session.lock(key):
                    raise _held_meanwhile(run_id)
                locked.append(key)
                if not self._write(conn, run_id, generation, first=found is None):
                    raise _held_meanwhile(run_id)
        except BaseException:
            for key in locked:  # the lease was not taken (its commit failed too)
                self._session.unlock(key)
            raise
        return generation

    def _write(self, conn: Connection[Any], run_id: str, generation: int, *, first: bool) -> bool:
        """Write this holder's lease of ``generation``; whether it was written (a first
        lease another taker wrote meanwhile is not)."""
        if first:
            row = conn.execute(
                "INSERT INTO leases (run_id, holder, generation, taken_at, expires_at)"
                " VALUES (%s, %s, 1, clock_timestamp(),"
                " clock_timestamp() + make_interval(secs => %s))"
                " ON CONFLICT (run_id) DO NOTHING RETURNING generation",
                (run_id, self.holder, self.seconds),
            ).fetchone()
            return row is not None
        conn.execute(
            "UPDATE leases SET holder = %s, generation = %s, taken_at = clock_timestamp(),"
            " expires_at = clock_timestamp() + make_interval(secs => %s) WHERE run_id = %s",
            (self.holder, generation, self.seconds, run_id),
        )
        return True

    def _release(self, run_id: str, generation: int) -> None:
        # A release that cannot reach the database leaves the lease to expire.
        with contextlib.suppress(Exception), self._pool.connection(self.heartbeat) as conn:
            conn.execute(
                "UPDATE leases SET holder = NULL, expires_at = clock_timestamp()"
                " WHERE run_id = %s AND holder = %s AND generation = %s",
                (run_id, self.holder, generation),
            )

    def held(self, run_id: str) -> bool:
        """Whether any writer holds the run's lease now: it has not expired, and its holder's
        session is open (a dead holder's lease holds nothing)."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT generation FROM leases WHERE run_id = %s AND holder IS NOT NULL"
                " AND expires_at > clock_timestamp()",
                (run_id,),
            ).fetchone()
            if row is None:
                return False
            with self._lock:
                mine = self._held.get(run_id) == row[0]
            return mine or holder_alive(conn, run_id, int(row[0]))

    def fence(
        self, db: SqlConnection, run_id: str, *, root_id: str | None, unleased_ok: bool
    ) -> None:
        """Refuse, in the transaction ``db``, a write of ``run_id`` that may not be made.

        Under a lease this object holds: the lease must be the run's current one
        and unexpired (it is renewed and locked till the transaction ends).
        Without one: no other writer may hold a live lease on the run, unless
        ``unleased_ok`` (an operator's decision on a deferred act). Either way the
        run's row, and its tree's root row, are locked, so writes of one run, and
        the numbering of one tree's events, go one transaction at a time.
        """
        with self._lock:
            generation = self._held.get(run_id)
        if generation is not None:
            # The lease row stays locked till the transaction ends: a taker waits for it.
            row = db.execute(
                "UPDATE leases SET expires_at = clock_timestamp() + make_interval(secs => ?)"
                " WHERE run_id = ? AND holder = ? AND generation = ?"
                " AND expires_at > clock_timestamp()"
                " RETURNING (SELECT root_id FROM runs WHERE id = leases.run_id)",
                (self.seconds, run_id, self.holder, generation),
            ).fetchone()
            if row is None:
                raise StorageError(
                    f"this writer lost its lease on run {run_id!r} (it expired, and another "
                    "writer may have taken the run): nothing was written"
                )
            found = row[0]
        else:
            if not unleased_ok:
                live = db.execute(
                    "SELECT holder FROM leases WHERE run_id = ? AND expires_at > clock_timestamp()",
                    (run_id,),
                ).fetchone()
                if live is not None:
                    raise StorageError(
                        f"run {run_id!r} is driven by another writer ({live[0]}); "
                        "this writer holds no lease on it: nothing was written"
                    )
            # No lease row to queue on: writers without one queue on the run's row.
            row = db.execute(
                "SELECT root_id FROM runs WHERE id = ? FOR UPDATE", (run_id,)
            ).fetchone()
            found = row[0] if row is not None else None
        root = root_id if root_id is not None else found
        if root is not None and root != run_id:
            self._fence_root(db, root, run_id)
        if root is not None:
            # One tree's events are numbered one transaction at a time.
            db.execute("SELECT 1 FROM runs WHERE id = ? FOR UPDATE", (root,))

    def _fence_root(self, db: SqlConnection, root: str, run_id: str) -> None:
        """A sub-agent is written under its tree's root's lease too, when this object holds
        it: a driver whose root was taken over cannot go on writing the root's children."""
        with self._lock:
            generation = self._held.get(root)
        if not generation:
            return
        alive = db.execute(
            "SELECT 1 FROM leases WHERE run_id = ? AND holder = ? AND generation = ?"
            " AND expires_at > clock_timestamp() FOR UPDATE",
            (root, self.holder, generation),
        ).fetchone()
        if alive is None:
            raise StorageError(
                f"this writer lost its lease on run {root!r}, the root of {run_id!r}'s tree "
                "(it expired, and another writer may have taken the tree): nothing was written"
            )

    # -- heartbeat ---------------------------------------------------------------

    def _start_heartbeat(self) -> None:
        with self._lock:
            if self._beating is not None or self._stop.is_set():
                return
            self._beating = threading.Thread(
                target=self._beat, name="io-harness lease heartbeat", daemon=True
            )
            self._beating.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat):
            with self._lock:
                held = [(run, gen) for run, gen in self._held.items() if gen]
            if held:
                # A renewal that fails (the database is away) is tried again next beat; a
                # lease that expires meanwhile is lost, and its writes are fenced out.
                with contextlib.suppress(Exception):
                    self._renew(held)
                with contextlib.suppress(Exception):
                    self._session.check()

    def _renew(self, held: list[tuple[str, int]]) -> None:
        with self._pool.connection(self.heartbeat) as conn:
            for run_id, generation in held:
                conn.execute(
                    "UPDATE leases SET expires_at = clock_timestamp() + make_interval(secs => %s)"
                    " WHERE run_id = %s AND holder = %s AND generation = %s"
                    " AND expires_at > clock_timestamp()",
                    (self.seconds, run_id, self.holder, generation),
                )

    def close(self) -> None:
        """Stop renewing, and give back the leases still held (each expires otherwise)."""
        self._stop.set()
        with self._lock:
            beating, self._beating = self._beating, None
            held = list(self._held.items())
        if beating is not None:
            beating.join()
        for run_id, generation in held:
            if generation:
                self._release(run_id, generation)
        self._session.close()
