"""The queue's database: pgqueuer's tables beside the store's, reached over psycopg (async).

The queue lives in the PostgreSQL database of the store, so a run and its
job are in one place and a fleet needs one URL. pgqueuer's installer creates
its tables the first time any process asks (``ensure_installed``), under an
advisory lock so that workers starting together install them once.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from io_harness._urls import redacted, without_password
from io_harness.errors import ConfigError, StorageError
from io_harness.store import Store
from io_harness.store._base import POSTGRES_SCHEMES

if TYPE_CHECKING:
    import psycopg
    from pgqueuer import Queries

__all__ = [
    "ENTRYPOINT",
    "QUEUE_LABEL",
    "WAITING_LABEL",
    "connected",
    "ensure_installed",
    "put",
    "queue_url",
]

ENTRYPOINT = "io_harness.drive"
"""pgqueuer's entrypoint of a job: "drive run X from its last committed step" (X the payload)."""
QUEUE_LABEL = "ioh.queue"
"""The label of a run stored by ``enqueue``: its drives go through the queue, decisions too."""
WAITING_LABEL = "ioh.queue.waiting"
"""The label of a queued run never driven yet: its first drive drops it and restarts its
clock (``Store.restart_clock``), so its wall-time budget does not count its wait."""
APPLICATION_NAME = "io-harness queue"
"""How the queue's connections name themselves in ``pg_stat_activity``."""
_INSTALL_LOCK = 0x10_4A_51_7E
"""The advisory lock key that serialises pgqueuer's install across processes."""


def queue_url(store: Store) -> str:
    """The ``postgresql://`` URL of ``store``'s database, where its queue lives.

    A store that is not PostgreSQL is a :class:`ConfigError`: the queue's
    jobs and its workers' takeover need the database many machines share.
    """
    url = getattr(store, "url", None)  # a PostgresStore's; a SQLite store has none
    if isinstance(url, str) and url.startswith(POSTGRES_SCHEMES):
        if importlib.util.find_spec("pgqueuer") is None:
            raise ConfigError(
                "the queue needs pgqueuer, which is not installed: "
                "pip install 'io-harness[postgres]'"
            )
        return url
    raise ConfigError(
        "the queue needs a PostgreSQL store (Store.open('postgresql://...')); "
        f"this one is {type(store).__name__}"
    )


@contextlib.asynccontextmanager
async def connected(url: str) -> AsyncIterator[psycopg.AsyncConnection]:
    """An autocommit connection to the queue's database (pgqueuer needs autocommit).

    A database that cannot be reached is a :class:`StorageError` naming it
    (without its password).
    """
    import psycopg

    try:
        connection = await psycopg.AsyncConnection.connect(
            url, autocommit=True, application_name=APPLICATION_NAME
        )
    except psycopg.Error as exc:
        raise StorageError(
            f"cannot reach the queue's database {without_password(url)}: {_said(exc, url)}"
        ) from None
    try:
        yield connection
    finally:
        with contextlib.suppress(psycopg.Error):
            await connection.close()


def _said(exc: BaseException, url: str) -> str:
    """The first line of a driver's error, which holds its reason, with nothing of the
    URL's credentials (libpq quotes what it could not parse)."""
    text = redacted(str(exc), url).strip()
    return text.splitlines()[0] if text else type(exc).__name__


async def ensure_installed(queries: Queries, url: str, *, known: bool = False) -> Queries:
    """``queries``, once pgqueuer's tables are in their database (installed if they were not).

    The check and the install hold an advisory lock, so processes starting
    together install the tables once. ``known``: trust that this process found
    them in ``url`` before (a lost table is then found by the query that needs it).
    """
    if known and url in _INSTALLED:
        return queries
    import psycopg

    lock = "SELECT pg_advisory_lock($1)"
    try:
        await queries.driver.execute(lock, _INSTALL_LOCK)
        try:
            if not await queries.schema_is_installed():
                await queries.install()
        finally:
            await queries.driver.execute("SELECT pg_advisory_unlock($1)", _INSTALL_LOCK)
    except psycopg.Error as exc:
        raise StorageError(f"cannot install the queue's tables: {_said(exc, url)}") from None
    _INSTALLED.add(url)
    return queries


_INSTALLED: set[str] = set()
"""The databases this process has found (or made) pgqueuer's tables in."""


async def put(url: str, run_ids: Sequence[str]) -> None:
    """Queue one job per run: "drive it from its last committed step".

    A job delivered twice, or a run queued twice, is harmless: the run's
    lease lets one worker drive it, and a finished run is left as it is.
    """
    if not run_ids:
        return
    import psycopg
    from pgqueuer import Queries

    async with connected(url) as connection:
        queries = Queries.from_psycopg_connection(connection)
        for known in (True, False):
            await ensure_installed(queries, url, known=known)
            try:
                await queries.enqueue(
                    [ENTRYPOINT] * len(run_ids),
                    [run_id.encode("utf-8") for run_id in run_ids],
                    [0] * len(run_ids),
                )
                return
            except psycopg.errors.UndefinedTable:
                _INSTALLED.discard(url)  # dropped since this process looked: install again
            except psycopg.Error as exc:
                raise StorageError(
                    f"cannot queue run {run_ids[0]!r} in {without_password(url)}: {_said(exc, url)}"
                ) from None
        raise StorageError(f"cannot queue run {run_ids[0]!r}: the queue's tables keep vanishing")
