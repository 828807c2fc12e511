"""A worker: takes queued jobs ("drive run X") from pgqueuer and drives each run.

A job only names a run, and driving it always starts from the run's last
committed step, so delivering a job twice is harmless: the run's lease lets
one driver at a time commit, and a finished run is left as it is. pgqueuer
gives a worker's jobs to another worker once the first stops beating
(``heartbeat_timeout``); a run whose lease its dead driver still holds is
tried again later, and the store's fencing keeps a paused driver that lost
the lease from committing anything after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from io_harness._queue._database import (
    ENTRYPOINT,
    connected,
    ensure_installed,
    queue_url,
)
from io_harness._queue._driver import ListeningApart
from io_harness._queue._drives import Drive, WorkReport
from io_harness._urls import redacted, without_password
from io_harness.errors import ConfigError, HarnessError, ResumeError, StorageError
from io_harness.loop import RunResult
from io_harness.store import Store

if TYPE_CHECKING:
    from pgqueuer import Queries, QueueManager
    from pgqueuer.models import Job

__all__ = ["Worker"]

RunDriver = Callable[[str], Awaitable[RunResult]]
"""Drives one stored run from its last committed step (a resume) to where it stops."""

RECONNECT_SECONDS = 60.0
"""How long a worker that lost the queue's database tries to connect again before it stops."""
STORAGE_ATTEMPTS = 20
"""How many times a job whose drive the store failed is tried before it is reported failed."""


class Worker:
    """Drives queued runs, ``concurrency`` at once, until stopped or, with ``drain``, done.

    ``fleet_limit`` (0: none) caps the runs driven at once by all the workers
    of the queue together, a provider's rate limit say; every worker should
    be given the same one (pgqueuer keeps the highest it is told).

    ``drive`` resumes one run by id (a harness's ``resume``). ``on_drive``
    hears about each job as it ends. With ``drain`` the worker stops once no
    job is queued or being driven anywhere (a dead worker's runs are taken
    over first); without it, it waits for more. Cancelling :meth:`run` (Ctrl-C
    at ``ioh worker``) stops the runs in flight at once, keeping their
    committed steps, and hands their jobs back to the queue for another worker.
    """

    def __init__(
        self,
        store: Store,
        drive: RunDriver,
        *,
        concurrency: int = 4,
        drain: bool = False,
        heartbeat_timeout: float = 30.0,
        fleet_limit: int = 0,
        on_drive: Callable[[Drive], None] | None = None,
    ) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(
                f"concurrency must be a whole number of at least 1, not {concurrency!r}"
            )
        if isinstance(fleet_limit, bool) or not isinstance(fleet_limit, int) or fleet_limit < 0:
            raise ConfigError(
                f"fleet_limit must be a whole number (0: no limit), not {fleet_limit!r}"
            )
        if (
            isinstance(heartbeat_timeout, bool)
            or not isinstance(heartbeat_timeout, int | float)
            or not heartbeat_timeout > 0
        ):
            raise ConfigError(
                f"heartbeat_timeout must be a number of seconds above 0, not {heartbeat_timeout!r}"
            )
        if not isinstance(drain, bool):
            raise ConfigError(f"drain must be True or False, not {drain!r}")
        self.url = queue_url(store)
        self.store = store
        self.drive = drive
        self.concurrency = concurrency
        self.fleet_limit = fleet_limit
        self.drain = drain
        self.heartbeat = timedelta(seconds=heartbeat_timeout)
        self.on_drive = on_drive
        self.report = WorkReport()
        self._driving: dict[asyncio.Task[Any], str] = {}
        self._handing_back = False
        self._connected = False

    @property
    def retry_delay(self) -> timedelta:
        """How long a busy or failed-storage job waits before it is tried again."""
        return max(timedelta(seconds=1), self.heartbeat / 4)

    async def run(self) -> WorkReport:
        """Take and drive jobs until cancelled or (with ``drain``) none is left; the tally.

        A database that cannot be reached at the start is a :class:`StorageError`.
        One that goes away later (a restart) is reconnected to, for up to
        :data:`RECONNECT_SECONDS`; its runs in flight go on meanwhile (the
        store reconnects on its own), and jobs whose end could not be recorded
        are taken again once stale, as a dead worker's are.
        """
        lost_at: float | None = None
        while True:
            self._connected = False
            try:
                await self._serve_connected()
                return self.report
            except StorageError as exc:
                if self._connected:
                    lost_at = None  # it served since the last loss: a new outage
                elif lost_at is None:
                    raise  # never reached: a wrong URL, a database that is down
                lost_at = lost_at if lost_at is not None else time.monotonic()
                if time.monotonic() - lost_at > RECONNECT_SECONDS:
                    raise StorageError(
                        f"{exc} (and no connection for {RECONNECT_SECONDS:.0f} s)"
                    ) from None
            await asyncio.sleep(1.0)

    async def _serve_connected(self) -> None:
        """Connect, then serve until done; losing the queue's connection is a StorageError."""
        import psycopg
        from pgqueuer import Queries

        async with connected(self.url) as querying, connected(self.url) as listening:
            driver = ListeningApart(querying, listening)
            queries = await ensure_installed(Queries(driver), self.url)
            self._connected = True
            manager = self._manager(queries)
            serving = asyncio.create_task(self._serve(manager, queries))
            try:
                # wait() leaves ``serving`` running when this task is cancelled, so
                # the runs in flight can be handed back before the queue closes.
                await asyncio.wait({serving})
            except asyncio.CancelledError:
                self._hand_back(manager)
                await asyncio.wait({serving})
                raise
            try:
                serving.result()
            except psycopg.Error as exc:
                raise StorageError(
                    f"lost the queue's database {without_password(self.url)}: "
                    f"{redacted(str(exc), self.url).strip()}"
                ) from None

    def _manager(self, queries: Queries) -> QueueManager:
        from pgqueuer import QueueManager

        class PerWorker(QueueManager):
            """pgqueuer's manager, holding at most ``concurrency`` jobs of this worker.

            pgqueuer enforces a per-worker cap in its dequeue query
            (``global_concurrency_limit``) but its ``run`` refuses a cap below
            twice the batch size, which would make ``concurrency=1`` hold two
            runs; the cap is passed to the query here instead.
            """

            cap = 1

            def fetch_jobs(
                self, batch_size: int, _limit: int | None, heartbeat_timeout: timedelta
            ) -> AsyncGenerator[Job, None]:
                return super().fetch_jobs(batch_size, self.cap, heartbeat_timeout)

        manager = PerWorker(queries)
        manager.cap = self.concurrency
        # pgqueuer enforces concurrency_limit in SQL across every worker of the queue.
        register = manager.entrypoint(
            ENTRYPOINT, concurrency_limit=self.fleet_limit, accepts_context=False
        )
        register(self._job)
        return manager

    async def _serve(self, manager: QueueManager, queries: Queries) -> None:
        """pgqueuer's loop, and (with ``drain``) the watch that stops it when all is done."""
        watch = asyncio.create_task(self._watch_drained(manager, queries)) if self.drain else None
        try:
            await manager.run(
                dequeue_timeout=max(timedelta(seconds=1), self.heartbeat / 4),
                batch_size=self.concurrency,
                heartbeat_timeout=self.heartbeat,
            )
        finally:
            if watch is not None:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch  # raises the watch's own error, if it failed

    async def _watch_drained(self, manager: QueueManager, queries: Queries) -> None:
        """Stop the manager once no job is queued or picked anywhere and none runs here.

        A picked job of a dead worker counts: it is taken over before the
        fleet is done. A run awaiting a decision is out of the queue and does
        not count.
        """
        table = queries.qbe.settings.qualified.queue_table
        query = (
            f"SELECT count(*) AS left FROM {table} "
            "WHERE entrypoint = $1 AND status IN ('queued', 'picked')"
        )
        poll = min(1.0, self.heartbeat.total_seconds() / 4)
        while not manager.shutdown.is_set():
            await asyncio.sleep(poll)
            if self._driving:
                continue
            try:
                rows = await queries.driver.fetch(query, ENTRYPOINT)
            except Exception:
                manager.shutdown.set()  # the queue is unreadable: stop, and say why (_serve)
                raise
            left = rows[0]["left"] if rows else None
            if left == 0 and not self._driving:
                manager.shutdown.set()

    def _hand_back(self, manager: QueueManager) -> None:
        """Stop taking jobs and stop the runs in flight; their jobs go back to the queue."""
        self._handing_back = True
        manager.shutdown.set()
        for task in self._driving:
            task.cancel()

    async def _job(self, job: Job) -> None:
        """pgqueuer's entrypoint: drive the job's run, and say what became of it.

        A busy run, a failing store and a stopping worker raise pgqueuer's
        ``RetryRequested``, which puts the job back in the queue.
        """
        from pgqueuer.errors import RetryRequested

        run_id = (job.payload or b"").decode("utf-8", "replace")
        task = asyncio.current_task()
        assert task is not None
        self._driving[task] = run_id
        try:
            drive = await self._drive(run_id, job.attempts)
        except asyncio.CancelledError:
            if not self._handing_back:
                raise
            drive = Drive(run_id, "handed_back")
        finally:
            self._driving.pop(task, None)
        self._tell(drive)
        if drive.kind == "handed_back":
            raise RetryRequested(timedelta(0), "the worker stopped") from None
        if drive.kind in ("busy", "retried"):
            raise RetryRequested(self.retry_delay, drive.error)

    async def _drive(self, run_id: str, attempts: int) -> Drive:
        store = self.store
        try:
            if store.load_run(run_id).status == "finished":
                return Drive(run_id, "finished")
            result = await self.drive(run_id)
        except StorageError as exc:
            if attempts + 1 >= STORAGE_ATTEMPTS:
                return Drive(run_id, "failed", error=f"{exc} (tried {attempts + 1} times)")
            return Drive(run_id, "retried", error=str(exc))
        except ResumeError as exc:
            return self._refused(run_id, exc, attempts)
        except ConfigError as exc:
            if self._awaits_a_decision(run_id):
                return Drive(run_id, "awaiting")
            return Drive(run_id, "failed", error=str(exc))
        except HarnessError as exc:
            return Drive(run_id, "failed", error=str(exc))
        except Exception as exc:  # a defect must not stop the worker or lose the job's run
            return Drive(run_id, "failed", error=f"{type(exc).__name__}: {exc}")
        return Drive(run_id, "ended", result=result)

    def _refused(self, run_id: str, exc: ResumeError, attempts: int) -> Drive:
        """A resume refused. Busy while another writer holds the run's lease; finished or
        failed (unknown) when the store says so; otherwise tried again, a few times."""
        try:
            if self.store.driven(run_id):
                return Drive(run_id, "busy", error=str(exc))
            status = self.store.load_run(run_id).status
        except HarnessError:
            return Drive(run_id, "failed", error=str(exc))
        if status == "finished":
            return Drive(run_id, "finished")
        if attempts + 1 >= STORAGE_ATTEMPTS:
            return Drive(run_id, "failed", error=f"{exc} (tried {attempts + 1} times)")
        return Drive(run_id, "retried", error=str(exc))

    def _awaits_a_decision(self, run_id: str) -> bool:
        """Whether the run (or an agent of its tree) waits on an act nobody has decided."""
        try:
            run = self.store.load_run(run_id)
            if run.status != "awaiting":
                return any(
                    a.decision_json is None
                    for node in self.store.tree(run_id)
                    for a in self.store.approvals(node.run.id)
                )
            return run.pending is not None and run.pending.decision_json is None
        except HarnessError:
            return False

    def _tell(self, drive: Drive) -> None:
        """Count the job, and tell ``on_drive``; one that raises is warned about, not fatal
        (the job's fate, a retry say, must still be recorded)."""
        self.report.counts[drive.kind] += 1
        if self.on_drive is None:
            return
        try:
            self.on_drive(drive)
        except Exception as exc:
            warnings.warn(
                f"io-harness on_drive raised {type(exc).__name__}: {exc}",
                RuntimeWarning,
                stacklevel=2,
            )
